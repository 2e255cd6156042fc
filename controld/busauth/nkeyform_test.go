package busauth_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestRevokedKeyRefusedInAnotherSpelling: an nkey is one string. The
// base32 decoder skips line breaks, so "U...\rX..." is the same key as
// "U...X..."; the callout once took that spelling, which no registered or
// revoked identity matched, and let a revoked operator key in as a
// pre-login connection (found by FuzzVerifyNonce). Only the canonical
// spelling of a key is accepted.
func TestRevokedKeyRefusedInAnotherSpelling(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	key, pub := newKey(t)
	admin := env.Client(env.AdminToken)
	if _, err := admin.BusIdentityAdd(t.Context(), api.BusIdentityAddRequest{PublicKey: pub,
		Kind: api.BusIdentityOperator, Name: "old-ops"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.BusIdentityRevoke(t.Context(), api.BusIdentityRevokeRequest{Name: "old-ops"}); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(t, env.NATSURL, nats.Nkey(pub, key.Sign)); err == nil {
		t.Fatal("a revoked operator key connected")
	}
	respelled := pub[:20] + "\r" + pub[20:]
	if p, err := dial(t, env.NATSURL, nats.Nkey(respelled, key.Sign)); err == nil {
		p.nc.Close()
		t.Fatal("the revoked key connected when spelled with a line break in it")
	}
}
