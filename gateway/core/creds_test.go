package core

import (
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

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
