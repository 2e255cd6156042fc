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
)

// Commands returns the daemon commands for the root command.
func Commands(f *cmdutil.Factory) []*cobra.Command {
	return []*cobra.Command{NewCmdDev(f, nil), NewCmdControld(f, nil), NewCmdHostd(f, nil), NewCmdSSHGate(f, nil)}
}

// newLogger returns a text logger at the named level.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, cmdutil.FlagErrorf("unknown log level %q (debug, info, warn, error)", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

func describe(kind, value string) string { return fmt.Sprintf("  %-10s %s", kind, value) }
