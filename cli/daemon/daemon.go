// Package daemon holds the thin commands that run gpuaas's daemons: each
// builds a Config from flags and environment, then runs the daemon until
// the context ends. The daemons themselves never read the environment.
package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/sshgate"
)

// Commands returns the daemon commands for the root command, all local
// only. sshTree is the command tree the SSH gateways serve (cli builds it
// from the same list as its own).
func Commands(f *cmdutil.Factory, sshTree sshgate.CommandTree) []*cobra.Command {
	const why = "runs a daemon on this machine"
	return []*cobra.Command{
		cmdutil.LocalOnly(NewCmdDev(f, sshTree, nil), why),
		cmdutil.LocalOnly(NewCmdControld(f, nil), why),
		cmdutil.LocalOnly(NewCmdHostd(f, nil), why),
		cmdutil.LocalOnly(NewCmdSSHGate(f, sshTree, nil), why),
	}
}

// newLogger returns a text logger at the named level.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, cmdutil.FlagErrorf("unknown log level %q (debug, info, warn, error)", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func describe(kind, value string) string { return fmt.Sprintf("  %-10s %s", kind, value) }
