package sshconfig

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/sshconfig"
	"github.com/gpuaas/gpuaas/internal/sshkeys"
	"github.com/gpuaas/gpuaas/internal/sshkeys/sshkeystest"
)

var t0 = time.Date(2030, 1, 10, 12, 0, 0, 0, time.UTC)

func TestPrepareWritesEverything(t *testing.T) {
	f := newFixture(t, t0)
	ctx := context.Background()
	s, err := Prepare(ctx, f.env, "")
	if err != nil {
		t.Fatal(err)
	}
	p := sshkeys.For(f.dir, "dev")
	if s.Paths != p || s.Alias != "gpuaas-dev" || s.Gateway != (sshconfig.Gateway{Host: "localhost", Port: 2222}) || !s.Written || !s.Identity.Renewed {
		t.Fatalf("got %+v; want the dev files, written, for localhost:2222 with a new certificate", s)
	}
	for path, want := range map[string]os.FileMode{p.Dir: 0o700, p.Key: 0o600, p.Config: 0o600, p.KnownHosts: 0o600} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: got mode %o; want %o", path, st.Mode().Perm(), want)
		}
	}
	cert, err := sshkeys.ReadCert(p.Cert)
	if err != nil || cert.ValidPrincipals[0] != sshkeystest.UserID || cert.KeyId != sshkeystest.Email {
		t.Fatalf("got certificate %v, %v; want one for %s", cert, err, sshkeystest.UserID)
	}

	// Again, an hour later: nothing to renew or rewrite.
	f.clock.Advance(time.Hour)
	s, err = Prepare(ctx, f.env, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Written || s.Identity.Renewed || f.ctrl.Signed() != 1 {
		t.Errorf("got written %v renewed %v signed %d; want nothing done the second time", s.Written, s.Identity.Renewed, f.ctrl.Signed())
	}

	// Past the certificate's TTL (8h): renewed transparently.
	f.clock.Advance(7*time.Hour + 56*time.Minute)
	if s, err = Prepare(ctx, f.env, ""); err != nil || !s.Identity.Renewed || f.ctrl.Signed() != 2 {
		t.Fatalf("got renewed %v, signed %d, %v; want a renewal near expiry", s != nil && s.Identity.Renewed, f.ctrl.Signed(), err)
	}

	// Past the session's end: the usual unauthenticated error.
	f.clock.Advance(5 * time.Hour)
	if _, err := Prepare(ctx, f.env, ""); !errors.Is(err, api.ErrUnauthenticated) {
		t.Fatalf("got %v; want unauthenticated once the session ended", err)
	}
}

func TestPrepareGatewayOverride(t *testing.T) {
	f := newFixture(t, t0)
	ctx := context.Background()
	s, err := Prepare(ctx, f.env, "gw.example.com:2200")
	if err != nil {
		t.Fatal(err)
	}
	if s.Gateway != (sshconfig.Gateway{Host: "gw.example.com", Port: 2200}) {
		t.Errorf("got gateway %v; want the flag's", s.Gateway)
	}
	stored, _ := clientconfig.Load(f.dir)
	if c, _ := stored.Context("dev"); c.Gateway != "gw.example.com:2200" {
		t.Errorf("got stored gateway %q; want the override saved", c.Gateway)
	}
	kh, _ := os.ReadFile(s.Paths.KnownHosts)
	if !strings.Contains(string(kh), "@cert-authority [gw.example.com]:2200 ") {
		t.Errorf("known_hosts does not name the override:\n%s", kh)
	}

	// Without the flag, the stored override still wins over controld's.
	if s, err = Prepare(ctx, f.env, ""); err != nil || s.Gateway.Host != "gw.example.com" {
		t.Fatalf("got %v, %v; want the stored override", s, err)
	}
	// auto forgets it.
	if s, err = Prepare(ctx, f.env, GatewayAuto); err != nil || s.Gateway != (sshconfig.Gateway{Host: "localhost", Port: 2222}) {
		t.Fatalf("got %v, %v; want controld's gateway again", s, err)
	}
	if c, _ := f.cfg.Context("dev"); c.Gateway != "" {
		t.Errorf("got stored gateway %q; want it cleared", c.Gateway)
	}

	// No override and nothing published.
	f.ctrl.Update(func(s *sshkeystest.Settings) { s.Gateway = "" })
	if _, err := Prepare(ctx, f.env, ""); !errors.Is(err, ErrNoGateway) || !strings.Contains(err.Error(), "--gateway") {
		t.Fatalf("got %v; want ErrNoGateway pointing at --gateway", err)
	}
}

func TestPrepareRefreshesKnownHostsOnRotation(t *testing.T) {
	f := newFixture(t, t0)
	ctx := context.Background()
	if _, err := Prepare(ctx, f.env, ""); err != nil {
		t.Fatal(err)
	}
	next := newTestCA(t, "host")
	f.ctrl.Update(func(s *sshkeystest.Settings) {
		s.HostCAs = append(f.ctrl.HostCA.AuthorizedKeysLines(), next.AuthorizedKeysLines()...)
	})
	s, err := Prepare(ctx, f.env, "")
	if err != nil {
		t.Fatal(err)
	}
	kh, _ := os.ReadFile(s.Paths.KnownHosts)
	if got := strings.Count(string(kh), "@cert-authority "); !s.Written || got != 2 {
		t.Errorf("got %d CA lines (written %v); want both keys of the rotation", got, s.Written)
	}
}
