package admin

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestNewCmdBootstrap(t *testing.T) {
	tests := []struct {
		name    string
		env     string
		args    []string
		wantURL string
		wantErr string
	}{
		{name: "flags", args: []string{"--database-url", "postgres://db/x", "--email", "root@example.com"}, wantURL: "postgres://db/x"},
		{name: "url from the environment", env: "postgres://env/x", args: []string{"--email", "root@example.com"}, wantURL: "postgres://env/x"},
		{name: "flag wins", env: "postgres://env/x", args: []string{"--database-url", "postgres://db/x", "--email", "root@example.com"}, wantURL: "postgres://db/x"},
		{name: "no url", args: []string{"--email", "root@example.com"}, wantErr: "--database-url (or GPUAAS_DATABASE_URL) is required"},
		{name: "no email", args: []string{"--database-url", "postgres://db/x"}, wantErr: "--email is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			var got *BootstrapOptions
			cmd := NewCmdBootstrap(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *BootstrapOptions) error { got = o; return nil })
			t.Setenv("GPUAAS_DATABASE_URL", tt.env)
			err := cmdtest.Execute(cmd, tt.args...)
			if tt.wantErr != "" {
				var fe *cmdutil.FlagError
				if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v; want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.DatabaseURL != tt.wantURL || got.Email != "root@example.com" {
				t.Errorf("got %+v; want url %s", *got, tt.wantURL)
			}
		})
	}
}

// TestBootstrapCommand runs the command against a real, empty database.
func TestBootstrapCommand(t *testing.T) {
	t.Parallel()
	dsn := testutil.Postgres(t, nil)
	ios, _, out, _ := cmdtest.Streams(true)
	cmd := NewCmdBootstrap(&cmdutil.Factory{IOStreams: ios}, nil)
	cmd.SetContext(t.Context())
	if err := cmdtest.Execute(cmd, "--database-url", dsn, "--email", "root@example.com"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Created the first admin, root@example.com", "gpuaas login --invite "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("got %q; want it to contain %q", out.String(), want)
		}
	}
	cmd = NewCmdBootstrap(&cmdutil.Factory{IOStreams: ios}, nil)
	cmd.SetContext(t.Context())
	if err := cmdtest.Execute(cmd, "--database-url", dsn, "--email", "other@example.com"); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("second bootstrap: got %v; want conflict", err)
	}
	ios, _, out, _ = cmdtest.Streams(false)
	cmd = NewCmdBootstrap(&cmdutil.Factory{IOStreams: ios}, nil)
	cmd.SetContext(t.Context())
	if err := cmdtest.Execute(cmd, "--database-url", dsn, "--email", "root@example.com", "--reissue", "--jq", ".invite.code"); err != nil {
		t.Fatalf("reissue: %v", err)
	}
	if code := strings.TrimSpace(out.String()); len(code) < 20 || strings.Contains(code, "\t") {
		t.Fatalf("reissue --jq .invite.code printed %q; want a code", out.String())
	}
}
