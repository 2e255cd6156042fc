package context

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/sshkeys/sshkeystest"
	"github.com/gpuaas/gpuaas/internal/trustbundle"
)

func TestNewCmdTrust(t *testing.T) {
	tests := []struct {
		name    string
		tty     bool
		args    []string
		want    TrustOptions
		wantErr string
	}{
		{name: "show", want: TrustOptions{}},
		{name: "reset on a terminal", tty: true, args: []string{"--reset"}, want: TrustOptions{Reset: true}},
		{name: "reset with --yes", args: []string{"--reset", "--yes", "--server-key", "SHA256:" + strings.Repeat("A", 43)},
			want: TrustOptions{Reset: true, Yes: true, ServerKey: "SHA256:" + strings.Repeat("A", 43)}},
		{name: "reset piped without --yes", args: []string{"--reset"}, wantErr: "pass --yes"},
		{name: "--yes alone", args: []string{"--yes"}, wantErr: "go with --reset"},
		{name: "bad server key", args: []string{"--reset", "--yes", "--server-key", "SHA256:short"}, wantErr: "not a SHA256 key fingerprint"},
		{name: "reset with --json", args: []string{"--reset", "--yes", "--json", "server_key"}, wantErr: "--json goes without --reset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(tt.tty)
			f, _ := factoryWithContexts(t, ios)
			var got *TrustOptions
			err := cmdtest.Execute(NewCmdTrust(f, func(_ context.Context, o *TrustOptions) error { got = o; return nil }), tt.args...)
			if tt.wantErr != "" {
				cmdtest.WantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Reset != tt.want.Reset || got.Yes != tt.want.Yes || got.ServerKey != tt.want.ServerKey {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}

// trustFixture is a context "dev" on the controld stand-in that pinned
// another server key than the stand-in's: what a moved or rebuilt server
// looks like to a client.
func trustFixture(t *testing.T, tty bool, input string) (*cmdutil.Factory, *clientconfig.Config) {
	t.Helper()
	cmdtest.ClearEnv(t)
	ctrl := sshkeystest.Start(t, func() time.Time { return now })
	cfg, err := clientconfig.Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, old, _ := ed25519.GenerateKey(rand.Reader)
	oldLine, _ := trustbundle.ServerKeyLine(old.Public().(ed25519.PublicKey))
	cfg.SetContext("dev", clientconfig.Context{Server: ctrl.URL, Trust: &clientconfig.Trust{ServerKey: oldLine,
		HostCAs: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ"},
		Gateway: "old.example.com:22", PinnedAt: now.Add(-time.Hour)}})
	if err := cfg.Save(); err != nil {
		t.Fatal(err)
	}
	ios, in, _, _ := cmdutil.Test()
	ios.SetStdinTTY(tty)
	ios.SetStdoutTTY(tty)
	ios.SetStderrTTY(tty)
	in.WriteString(input)
	f := &cmdutil.Factory{IOStreams: ios, Now: func() time.Time { return now },
		Config: func() (*clientconfig.Config, error) { return cfg, nil },
		Client: func() (*api.Client, error) { return ctrl.Client(""), nil }}
	return f, cfg
}

func serverFP(t *testing.T) string {
	t.Helper()
	line, err := trustbundle.ServerKeyLine(sshkeystest.ServerKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return trustbundle.Fingerprint(line)
}

// TestTrustReset: the explicit way to trust another server key shows the
// fingerprints, asks, and replaces the pins only on yes; --server-key
// refuses a server that answers with another key.
func TestTrustReset(t *testing.T) {
	pinnedKey := func(cfg *clientconfig.Config) string {
		saved := reload(t, cfg)
		c, _ := saved.Context("dev")
		if c.Trust == nil {
			return ""
		}
		return trustbundle.Fingerprint(c.Trust.ServerKey)
	}

	t.Run("declined", func(t *testing.T) {
		f, cfg := trustFixture(t, true, "n\n")
		before := pinnedKey(cfg)
		err := cmdtest.Execute(NewCmdTrust(f, nil), "--reset")
		if !errors.Is(err, cmdutil.ErrCancelled) || pinnedKey(cfg) != before {
			t.Fatalf("got %v, pinned %s; want cancelled and %s kept", err, pinnedKey(cfg), before)
		}
		if !strings.Contains(f.IOStreams.ErrOut.(interface{ String() string }).String(), serverFP(t)) {
			t.Errorf("the prompt did not show the new server key %s", serverFP(t))
		}
	})
	t.Run("accepted", func(t *testing.T) {
		f, cfg := trustFixture(t, true, "y\n")
		if err := cmdtest.Execute(NewCmdTrust(f, nil), "--reset"); err != nil {
			t.Fatal(err)
		}
		c, _ := reload(t, cfg).Context("dev")
		if trustbundle.Fingerprint(c.Trust.ServerKey) != serverFP(t) || c.Trust.Gateway != "localhost:2222" || len(c.Trust.HostCAs) != 1 ||
			!c.Trust.PinnedAt.Equal(now) {
			t.Fatalf("pins after the reset: %+v; want the server's, pinned now", c.Trust)
		}
	})
	t.Run("expected key matches", func(t *testing.T) {
		f, cfg := trustFixture(t, false, "")
		if err := cmdtest.Execute(NewCmdTrust(f, nil), "--reset", "--yes", "--server-key", serverFP(t)); err != nil {
			t.Fatal(err)
		}
		if pinnedKey(cfg) != serverFP(t) {
			t.Fatalf("pinned %s; want %s", pinnedKey(cfg), serverFP(t))
		}
	})
	t.Run("expected key differs", func(t *testing.T) {
		f, cfg := trustFixture(t, false, "")
		before := pinnedKey(cfg)
		err := cmdtest.Execute(NewCmdTrust(f, nil), "--reset", "--yes", "--server-key", "SHA256:"+strings.Repeat("A", 43))
		if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "not the SHA256:AAAA") || pinnedKey(cfg) != before {
			t.Fatalf("got %v, pinned %s; want a conflict and %s kept", err, pinnedKey(cfg), before)
		}
	})
	t.Run("show", func(t *testing.T) {
		f, cfg := trustFixture(t, false, "")
		out := f.IOStreams.Out.(interface{ String() string })
		if err := cmdtest.Execute(NewCmdTrust(f, nil), "--json", "server_key,gateway,host_cas"); err != nil {
			t.Fatal(err)
		}
		c, _ := cfg.Context("dev")
		want := `{"gateway":"old.example.com:22","host_cas":["` + trustbundle.Fingerprint(c.Trust.HostCAs[0]) + `"],"server_key":"` +
			trustbundle.Fingerprint(c.Trust.ServerKey) + `"}`
		if strings.TrimSpace(out.String()) != want {
			t.Fatalf("got %s; want %s", out.String(), want)
		}
	})
}

// TestAddServerKey: a server key given to `context add` is pinned ahead of
// the first login.
func TestAddServerKey(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, cfg := factoryWithContexts(t, ios)
	fp := "SHA256:" + strings.Repeat("B", 43)
	if err := cmdtest.Execute(NewCmdAdd(f, nil), "lab", "--server", "nats://10.0.0.5:4222", "--server-key", fp); err != nil {
		t.Fatal(err)
	}
	c, _ := reload(t, cfg).Context("lab")
	if c.Trust == nil || c.Trust.ServerKey != fp || !c.Trust.PinnedAt.Equal(now) {
		t.Fatalf("got pins %+v; want %s pinned", c.Trust, fp)
	}
	err := cmdtest.Execute(NewCmdAdd(f, nil), "lab2", "--server", "nats://10.0.0.5:4222", "--server-key", "ssh-rsa AAAA")
	cmdtest.WantUsageError(t, err, "--server-key")
}
