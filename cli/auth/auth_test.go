package auth

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/config"
	"github.com/gpuaas/gpuaas/internal/api"
)

var now = time.Date(2030, 1, 10, 12, 0, 0, 0, time.UTC)

// errReachedServer stands in for the client: reaching it means the command
// got past its local checks.
var errReachedServer = &api.Error{Code: api.CodeUnavailable, Message: "reached the server"}

func noServer() (*api.Client, error) { return nil, errReachedServer }

func testStreams(tty bool) (*cmdutil.IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	ios, in, out, errOut := cmdutil.Test()
	ios.SetStdinTTY(tty)
	ios.SetStdoutTTY(tty)
	ios.SetStderrTTY(tty)
	ios.SetNoColor(true)
	return ios, in, out, errOut
}

// testFactory has a config in a temp dir holding ctx as context "dev".
func testFactory(t *testing.T, ios *cmdutil.IOStreams, ctx *config.Context) (*cmdutil.Factory, *config.Config) {
	t.Helper()
	for _, env := range []string{config.EnvServer, config.EnvToken, config.EnvProject, config.EnvContext} {
		t.Setenv(env, "")
	}
	cfg, err := config.Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if ctx != nil {
		cfg.SetContext("dev", *ctx)
	}
	f := &cmdutil.Factory{
		IOStreams: ios,
		Config:    func() (*config.Config, error) { return cfg, nil },
		Client:    noServer,
		Now:       func() time.Time { return now },
	}
	return f, cfg
}

func execute(cmd *cobra.Command, args ...string) error {
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	_, err := cmd.ExecuteC()
	return err
}
