package sshgate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// TestRefusedKeyIsToldWhy is the regression test of "after logout plain
// ssh says only `Permission denied (publickey)`": OpenSSH, at its default
// LogLevel, shows the gateway's banner saying why the key was refused and
// to run `gpuaas login`, for a key whose certificate `gpuaas logout`
// removed and for a certificate of another authority; a client that logs
// in sees no banner.
func TestRefusedKeyIsToldWhy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.newUser()
	alloc := e.addAlloc(u)
	target := alloc + "@127.0.0.1"
	// The default LogLevel (INFO) prints banners; ssh takes an option's
	// first value, so ERROR is dropped rather than overridden.
	openSSHAt := func(u *user) *openSSH {
		o := newOpenSSH(t, e, u)
		i := slices.Index(o.args, "LogLevel=ERROR")
		o.args = slices.Delete(o.args, i-1, i+1)
		return o
	}

	o := openSSHAt(u)
	if out, errOut, code := o.run(nil, "ssh", target, "echo in"); code != 0 || out != "in\n" || strings.Contains(errOut, "gpuaas:") {
		t.Fatalf("logged in: stdout %q, stderr %q, exit %d; want in, and no banner", out, errOut, code)
	}
	// What `gpuaas logout` leaves: the key, no certificate.
	if err := os.Remove(filepath.Join(o.dir, "id_ed25519-cert.pub")); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := o.run(nil, "ssh", target, "true")
	if code != 255 || !strings.Contains(errOut, "gpuaas: a key was refused: it has no gpuaas certificate") ||
		!strings.Contains(errOut, "run `gpuaas login`") || !strings.Contains(errOut, "Permission denied (publickey)") {
		t.Fatalf("after logout: stderr %q, exit %d; want the reason, the login hint and permission denied", errOut, code)
	}

	foreign := openSSHAt(e.userWithCert(sshtest.NewAuthority(t, api.CAUser), u.id))
	_, errOut, code = foreign.run(nil, "ssh", target, "true")
	if code != 255 || !strings.Contains(errOut, "not issued by this platform") || strings.Count(errOut, "gpuaas: a key was refused") != 1 {
		t.Fatalf("another CA's certificate: stderr %q, exit %d; want one banner with the reason", errOut, code)
	}
}
