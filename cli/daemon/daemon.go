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
	"github.com/gpuaas/gpuaas/cli/tui"
	"github.com/gpuaas/gpuaas/internal/cmdmode"
)

// Commands returns the daemon commands for the root command, all local
// only. sshTree is the command tree the SSH gateways serve (cli builds it
// from the same list as its own).
func Commands(f *cmdutil.Factory, sshTree cmdutil.CommandTree) []*cobra.Command {
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

// sshCommands serves sshTree in a gateway's command mode (`ssh
// gpuaas@gateway <command>`); without a tree command mode is off.
func sshCommands(sshTree cmdutil.CommandTree) cmdmode.Server {
	if sshTree == nil {
		return nil
	}
	return cmdutil.SSHCommands(sshTree)
}

// sshDashboard serves the dashboard in a gateway's command mode (`ssh -t
// gpuaas@gateway`).
var sshDashboard = cmdutil.SSHDashboard(tui.ServeSSH)
