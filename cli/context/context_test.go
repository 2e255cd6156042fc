package context

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/config"
	"github.com/gpuaas/gpuaas/internal/api"
)

var now = time.Date(2030, 1, 10, 12, 0, 0, 0, time.UTC)

func testStreams(tty bool) (*cmdutil.IOStreams, *bytes.Buffer, *bytes.Buffer) {
	ios, _, out, errOut := cmdutil.Test()
	ios.SetStdinTTY(tty)
	ios.SetStdoutTTY(tty)
	ios.SetStderrTTY(tty)
	ios.SetNoColor(true)
	return ios, out, errOut
}

// testFactory has a config in a temp dir with two contexts, dev (current,
// logged in until now+2h) and prod (logged out), and no GPUAAS_* settings.
func testFactory(t *testing.T, ios *cmdutil.IOStreams) (*cmdutil.Factory, *config.Config) {
	t.Helper()
	for _, env := range []string{config.EnvServer, config.EnvToken, config.EnvProject, config.EnvContext} {
		t.Setenv(env, "")
	}
	cfg, err := config.Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.SetContext("dev", config.Context{Server: "nats://127.0.0.1:4222", User: "ada@example.com", Token: "secret-dev-token",
		TokenExpiresAt: now.Add(2 * time.Hour), Project: "ml"})
	cfg.SetContext("prod", config.Context{Server: "tls://gpuaas.example.com:4222", Gateway: "gpuaas.example.com:22",
		Token: "secret-stale-token", TokenExpiresAt: now.Add(-time.Hour)})
	if err := cfg.Save(); err != nil {
		t.Fatal(err)
	}
	f := &cmdutil.Factory{
		IOStreams: ios,
		Config:    func() (*config.Config, error) { return cfg, nil },
		Client:    func() (*api.Client, error) { return nil, errors.New("context commands never reach a server") },
		Now:       func() time.Time { return now },
	}
	return f, cfg
}

// reload reads the config file back from disk.
func reload(t *testing.T, cfg *config.Config) *config.Config {
	t.Helper()
	c, err := config.Load(strings.TrimSuffix(cfg.Path(), "/"+config.FileName))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func execute(cmd *cobra.Command, args ...string) error {
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	_, err := cmd.ExecuteC()
	return err
}

func wantUsageError(t *testing.T, err error, contains string) {
	t.Helper()
	var fe *cmdutil.FlagError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), contains) {
		t.Fatalf("got %v; want a usage error containing %q", err, contains)
	}
}
