package sshgate

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestGatewayKeyRegisteredLate: a gateway whose key an admin has not
// registered yet serves, but opens no shell; once the key is registered it
// gets its gateway certificate by itself (no restart) and shells open.
func TestGatewayKeyRegisteredLate(t *testing.T) {
	t.Parallel()
	unregistered := sshtest.NewKey(t)
	e := newEnv(t, envOptions{config: func(c *Config) { c.GatewayKey = unregistered }})
	u := e.newUser()
	alloc := e.addAlloc(u)
	_, stderr, status, err := sshtest.Run(t, e.dial(u, alloc), "echo in")
	if err != nil || status != exitGatewayError || !strings.Contains(stderr, "gpuaas gateway:") {
		t.Fatalf("without a registered key: got %q, %d, %v; want the gateway's refusal", stderr, status, err)
	}
	nk, err := bus.PublicKeyNkey(unregistered.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	// Registered under the gateway's own name (that of the key it logs in
	// with): controld certifies a key only for the gateway it belongs to.
	if _, err := e.ctl.Server.EnsureBusIdentity(context.Background(), api.BusIdentityAddRequest{PublicKey: nk,
		Kind: api.BusIdentityGateway, Name: "sshgate"}, e.ctl.Admin.ID); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the gateway to get its certificate", func() bool {
		_, err := e.gw.creds.current(time.Now())
		return err == nil
	})
	out, _, status, err := sshtest.Run(t, e.dial(u, alloc), "echo in")
	if err != nil || status != 0 || out != "in\n" {
		t.Fatalf("after registration: got %q, %d, %v; want in", out, status, err)
	}
}

// TestGatewayCredsRenewal: a certificate is renewed at half-life and not
// used once expired.
func TestGatewayCredsRenewal(t *testing.T) {
	key := sshtest.NewKey(t)
	c, err := newGatewayCreds(key)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	if c.untilRenewal(now) != 0 {
		t.Fatal("no certificate yet: want renewal now")
	}
	if _, err := c.current(now); err == nil {
		t.Fatal("no certificate yet: got a signer")
	}
	ca, err := sshcert.New(api.CAInternal, sshtest.NewKey(t))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.SignGateway(c.key.PublicKey(), "gw", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewCertSigner(cert, c.key)
	if err != nil {
		t.Fatal(err)
	}
	c.cert, c.signer = cert, signer
	// Valid from now-30s to now+1h: half-life at now+29m45s.
	if got, want := c.untilRenewal(now), 29*time.Minute+45*time.Second; got != want {
		t.Errorf("until renewal: got %s; want %s", got, want)
	}
	if _, err := c.current(now.Add(59 * time.Minute)); err != nil {
		t.Errorf("before expiry: %v", err)
	}
	if _, err := c.current(now.Add(time.Hour)); err == nil {
		t.Error("at expiry: got a signer; want none")
	}
}
