package sshgate

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
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
		_, err := e.gw.core.GatewayCredential(time.Now())
		return err == nil
	})
	out, _, status, err := sshtest.Run(t, e.dial(u, alloc), "echo in")
	if err != nil || status != 0 || out != "in\n" {
		t.Fatalf("after registration: got %q, %d, %v; want in", out, status, err)
	}
}
