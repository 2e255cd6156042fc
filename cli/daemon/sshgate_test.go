package daemon

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdSSHGate(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      string // GPUAAS_NKEY_FILE
		wantErr  bool
		wantKey  string
		wantOpts func(*SSHGateOptions) bool
	}{
		// A flag on the command line wins over the environment (settingsHelp).
		{name: "nkey flag", args: []string{"--nkey", "/etc/gw.nk"}, env: "/env.nk", wantKey: "/etc/gw.nk"},
		{name: "nkey from the environment", env: "/env.nk", wantKey: "/env.nk"},
		{name: "no nkey", wantErr: true},
		{name: "flags", env: "/env.nk", wantKey: "/env.nk",
			args: []string{"--listen", "127.0.0.1:2200", "--server", "tls://n:4222", "--nats-ca", "/ca.pem", "--host-key", "/k",
				"--advertise", "ssh.example.test:22", "--principal", "a", "--principal", "b", "--metrics-addr", "127.0.0.1:9465"},
			wantOpts: func(o *SSHGateOptions) bool {
				return o.Listen == "127.0.0.1:2200" && o.NATS.URL == "tls://n:4222" && o.NATS.CA == "/ca.pem" && o.HostKeyPath == "/k" &&
					o.Advertise == "ssh.example.test:22" && slices.Equal(o.Principals, []string{"a", "b"}) && o.MetricsAddr == "127.0.0.1:9465"
			}},
		{name: "defaults", env: "/env.nk", wantKey: "/env.nk", wantOpts: func(o *SSHGateOptions) bool {
			return o.Listen == ":2222" && o.NATS.URL == "nats://127.0.0.1:4222" && o.HostKeyPath != "" && !o.NATS.AllowPlaintext &&
				o.MetricsAddr == "" && o.Config.NodeTransport == "link"
		}},
		{name: "node transport ssh", args: []string{"--node-transport", "ssh"}, env: "/env.nk", wantKey: "/env.nk",
			wantOpts: func(o *SSHGateOptions) bool { return o.Config.NodeTransport == "ssh" }},
		{name: "unknown node transport", args: []string{"--node-transport", "tls"}, env: "/env.nk", wantErr: true},
		{name: "arguments refused", args: []string{"extra"}, env: "/env.nk", wantErr: true},
		{name: "https front", args: []string{"--https-listen", ":8443", "--https-domain", "apps.example.test", "--https-cert", "/c.pem", "--https-key", "/k.pem"},
			env: "/env.nk", wantKey: "/env.nk", wantOpts: func(o *SSHGateOptions) bool {
				h := o.Config.HTTPS
				return h.Listen == ":8443" && h.Domain == "apps.example.test" && h.CertFile == "/c.pem" && h.KeyFile == "/k.pem"
			}},
		{name: "https front without a certificate", args: []string{"--https-listen", ":8443", "--https-domain", "apps.example.test"}, env: "/env.nk", wantErr: true},
		{name: "https front with acme", args: []string{"--https-listen", ":443", "--https-domain", "apps.example.test", "--https-acme-ca", "https://acme.example.test/dir",
			"--https-acme-email", "ops@example.test", "--https-acme-ca-root", "/root.pem", "--https-cookie-key-file", "/cookie.key"},
			env: "/env.nk", wantKey: "/env.nk", wantOpts: func(o *SSHGateOptions) bool {
				h := o.Config.HTTPS
				return h.ACME.CA == "https://acme.example.test/dir" && h.ACME.Email == "ops@example.test" && h.ACME.CARootFile == "/root.pem" &&
					h.ACME.Dir == "/var/lib/gpuaas/sshgate/acme" && h.CookieKeyFile == "/cookie.key" && h.CertFile == ""
			}},
		{name: "https front with acme and a certificate", args: []string{"--https-listen", ":443", "--https-domain", "apps.example.test",
			"--https-acme-ca", "https://acme.example.test/dir", "--https-cert", "/c.pem", "--https-key", "/k.pem"}, env: "/env.nk", wantErr: true},
		{name: "https front with an acme ca that is not https", args: []string{"--https-listen", ":443", "--https-domain", "apps.example.test",
			"--https-acme-ca", "http://acme.example.test/dir"}, env: "/env.nk", wantErr: true},
		{name: "https front with acme and no storage", args: []string{"--https-listen", ":443", "--https-domain", "apps.example.test",
			"--https-acme-ca", "https://acme.example.test/dir", "--https-acme-dir", ""}, env: "/env.nk", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GPUAAS_NKEY_FILE", tt.env)
			t.Setenv("GPUAAS_NATS_URL", "")
			t.Setenv("GPUAAS_NATS_CA", "")
			ios, _, _, _ := cmdutil.Test()
			var got *SSHGateOptions
			cmd := NewCmdSSHGate(cmdtest.Factory(ios), nil, func(_ context.Context, o *SSHGateOptions) error {
				got = o
				return nil
			})
			cmd.SetArgs(tt.args)
			cmd.SetOut(ios.Out)
			cmd.SetErr(ios.ErrOut)
			err := cmd.Execute()
			if tt.wantErr {
				var flagErr *cmdutil.FlagError
				if !errors.As(err, &flagErr) {
					t.Fatalf("got %v; want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.NkeyFile != tt.wantKey {
				t.Fatalf("got nkey file %q; want %q", got.NkeyFile, tt.wantKey)
			}
			if tt.wantOpts != nil && !tt.wantOpts(got) {
				t.Fatalf("got options %+v", got)
			}
		})
	}
}
