// Package cmdtest is what the cli packages' command tests share: a Factory
// with a stopped clock and a client that fails, the same with a config of
// its own in a temporary directory, and a runner for a cobra command.
package cmdtest

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

// Now is where the clock of Factory stands.
var Now = time.Date(2030, 1, 10, 12, 0, 0, 0, time.UTC)

// ErrReachedServer is what the client of Factory fails with: a command
// that returns it got past its local checks (flags, prompts, config) and
// tried to reach the server.
var ErrReachedServer = &api.Error{Code: api.CodeUnavailable, Message: "reached the server"}

// NoServer is a client func that fails with ErrReachedServer.
func NoServer() (*api.Client, error) { return nil, ErrReachedServer }

// Factory returns a Factory over ios for a command test: the clock stopped
// at Now, no config, and a client that fails with ErrReachedServer. Tests
// replace what they need (f.Client, f.Now, f.Config).
func Factory(ios *cmdutil.IOStreams) *cmdutil.Factory {
	return &cmdutil.Factory{IOStreams: ios, Now: func() time.Time { return Now }, Client: NoServer}
}

// ConfigFactory is Factory with a config of its own: the GPUAAS_*
// environment cleared (ClearEnv), an empty config file in a temporary
// directory, holding ctx as the context "dev" when ctx is not nil. It
// returns the config too, for the test to set up or look into.
func ConfigFactory(t testing.TB, ios *cmdutil.IOStreams, ctx *clientconfig.Context) (*cmdutil.Factory, *clientconfig.Config) {
	t.Helper()
	ClearEnv(t)
	cfg, err := clientconfig.Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if ctx != nil {
		cfg.SetContext("dev", *ctx)
	}
	f := Factory(ios)
	f.Config = func() (*clientconfig.Config, error) { return cfg, nil }
	return f, cfg
}

// ClearEnv empties the GPUAAS_* variables that override the config file,
// so that the developer's own settings never reach a test (t.Setenv: they
// come back after it).
func ClearEnv(t testing.TB) {
	t.Helper()
	for _, env := range []string{clientconfig.EnvServer, clientconfig.EnvToken, clientconfig.EnvProject, clientconfig.EnvContext,
		clientconfig.EnvCorrelationID, clientconfig.EnvDebug} {
		t.Setenv(env, "")
	}
}

// Execute runs cmd with args and returns its error. What cobra prints
// itself (usage, the error) is discarded: tests look at the error and at
// the command's IOStreams.
func Execute(cmd *cobra.Command, args ...string) error {
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	_, err := cmd.ExecuteC()
	return err
}

// Streams returns test IOStreams without colour whose stdin, stdout and
// stderr are terminals when tty is set, and the buffers behind them.
func Streams(tty bool) (ios *cmdutil.IOStreams, in, out, errOut *bytes.Buffer) {
	ios, in, out, errOut = cmdutil.Test()
	ios.SetStdinTTY(tty)
	ios.SetStdoutTTY(tty)
	ios.SetStderrTTY(tty)
	ios.SetNoColor(true)
	return ios, in, out, errOut
}

// WantUsageError fails the test unless err is a usage error (exit code 2)
// whose text contains contains.
func WantUsageError(t testing.TB, err error, contains string) {
	t.Helper()
	var fe *cmdutil.FlagError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), contains) {
		t.Fatalf("got %v; want a usage error containing %q", err, contains)
	}
}
