package daemon

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

// TestSSHGateACMEConfigFile: the HTTPS front's ACME and cookie key
// settings come from `gpuaas sshgate --config FILE` as from the flags, and
// --print-config shows them.
func TestSSHGateACMEConfigFile(t *testing.T) {
	clearDaemonEnv(t)
	path := settingsFile(t, `nkey: /etc/gpuaas/sshgate.nk
https-listen: :443
https-domain: apps.example.test
https-acme-ca: https://acme.example.test/directory
https-acme-email: ops@example.test
https-acme-ca-root: /etc/gpuaas/acme-root.pem
https-acme-dir: /srv/gpuaas/acme
https-cookie-key-file: /etc/gpuaas/cookie.key
`)
	ios, _, _, _ := cmdutil.Test()
	var got *SSHGateOptions
	cmd := NewCmdSSHGate(cmdtest.Factory(ios), nil, func(_ context.Context, o *SSHGateOptions) error { got = o; return nil })
	if err := runDaemon(cmd, ios, "--config", path); err != nil {
		t.Fatal(err)
	}
	h := got.Config.HTTPS
	for _, c := range []struct{ name, got, want string }{
		{"https-acme-ca", h.ACME.CA, "https://acme.example.test/directory"},
		{"https-acme-email", h.ACME.Email, "ops@example.test"},
		{"https-acme-ca-root", h.ACME.CARootFile, "/etc/gpuaas/acme-root.pem"},
		{"https-acme-dir", h.ACME.Dir, "/srv/gpuaas/acme"},
		{"https-cookie-key-file", h.CookieKeyFile, "/etc/gpuaas/cookie.key"},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %q; want %q", c.name, c.got, c.want)
		}
	}

	ios, _, out, _ := cmdutil.Test()
	cmd = NewCmdSSHGate(cmdtest.Factory(ios), nil, func(context.Context, *SSHGateOptions) error {
		t.Fatal("--print-config ran the gateway")
		return nil
	})
	if err := runDaemon(cmd, ios, "--config", path, "--print-config"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"https-acme-ca: https://acme.example.test/directory", "https-acme-dir: /srv/gpuaas/acme",
		"https-cookie-key-file: /etc/gpuaas/cookie.key"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--print-config: no %q in\n%s", want, out.String())
		}
	}
}
