package gate_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/busauth"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/gate"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// register records pub as the bus identity of kind and name (`gpuaas ops
// nats-identity add`) and returns its nkey.
func (w *world) register(t *testing.T, pub ed25519.PublicKey, kind, name string) string {
	t.Helper()
	nk, err := bus.PublicKeyNkey(pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(context.Background(), w.pool, func(tx pgx.Tx) error {
		_, err := busauth.AddIdentity(context.Background(), tx, api.BusIdentityAddRequest{PublicKey: nk, Kind: kind, Name: name}, "admin", now)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return nk
}

// TestCredentialsNeedTheCallersRegisteredKey: gate.credentials certifies
// only the key registered as a gateway under the calling gateway's own
// name. A key not registered, a key registered as an operator, and the
// key of another gateway are refused as forbidden, each refusal audited
// on its own; the caller's key gets a gateway certificate of the internal
// CA naming it.
func TestCredentialsNeedTheCallersRegisteredKey(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	ask := endpointtest.Find(t, w.defs, gateproto.EndpointGateCredentials)
	keys := map[string]ssh.PublicKey{}
	for _, name := range []string{"unregistered", "operator", "other", "sshgate"} {
		k, priv := newKey(t)
		keys[name] = k
		switch name {
		case "operator":
			w.register(t, priv.Public().(ed25519.PublicKey), api.BusIdentityOperator, "sshgate")
		case "other", "sshgate":
			w.register(t, priv.Public().(ed25519.PublicKey), api.BusIdentityGateway, name)
		}
	}
	gw := w.gateway.Principal.UserID
	var want []string
	for _, name := range []string{"unregistered", "operator", "other"} {
		req := gateproto.GateCredentialsRequest{PublicKey: string(ssh.MarshalAuthorizedKey(keys[name]))}
		if resp, err := endpointtest.Read[gateproto.GateCredentialsResponse](ctx, ask, w.gateway, req); api.CodeOf(err) != api.CodeForbidden {
			t.Errorf("%s key: %+v, %v; want forbidden", name, resp, err)
		}
		want = append(want, "gate.credentials_refused "+ssh.FingerprintSHA256(keys[name])+" "+gw)
	}
	if a := w.audits(t); !slices.Equal(a, want) {
		t.Fatalf("audit of the refusals: %q; want %q", a, want)
	}

	req := gateproto.GateCredentialsRequest{PublicKey: string(ssh.MarshalAuthorizedKey(keys["sshgate"]))}
	resp, err := endpointtest.Read[gateproto.GateCredentialsResponse](ctx, ask, w.gateway, req)
	if err != nil || resp.Name != "sshgate" {
		t.Fatalf("the caller's own key: %+v, %v", resp, err)
	}
	cert, _, _, _, err := ssh.ParseAuthorizedKey([]byte(resp.Certificate))
	if err != nil {
		t.Fatal(err)
	}
	ic, err := w.cas.Authority(ctx, w.pool, api.CAInternal)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := sshcert.VerifyGateway(ic.Trusted(), cert, now); err != nil || id.Name != "sshgate" {
		t.Fatalf("gateway certificate: %+v, %v; want one naming sshgate", id, err)
	}
	want = append(want, "gate.credentials "+ssh.FingerprintSHA256(keys["sshgate"])+" "+gw)
	if a := w.audits(t); !slices.Equal(a, want) {
		t.Fatalf("audit after the grant: %q; want %q", a, want)
	}
}

// TestLoginTakesASignedFreshAssertion: gate.login gives a registered
// gateway key a service session of SessionTTL for an assertion it signed
// now, audited; an assertion issued two minutes ago, one signed by
// another key, and one of a key not registered as a gateway are refused
// as unauthenticated, and open no session.
func TestLoginTakesASignedFreshAssertion(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := nkeys.Decode(nkeys.PrefixByteUser, []byte(pub))
	if err != nil {
		t.Fatal(err)
	}
	w.register(t, ed25519.PublicKey(raw), api.BusIdentityGateway, "sshgate")
	stranger, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	strangerPub, err := stranger.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	assertion := func(signer nkeys.KeyPair, key string, at time.Time) gateproto.GateLoginRequest {
		req := gateproto.GateLoginRequest{PublicKey: key, IssuedAt: at, Nonce: "0123456789abcdef"}
		if req.Signature, err = signer.Sign(gateproto.GateLoginMessage(key, at, req.Nonce)); err != nil {
			t.Fatal(err)
		}
		return req
	}
	login := func(req gateproto.GateLoginRequest, key string) ([]byte, error) {
		return w.deps.Login(ctx, &endpoint.Request{IdempotencyKey: key}, req)
	}
	sessions := func() int {
		var n int
		if err := w.pool.QueryRow(ctx, `SELECT count(*) FROM sessions`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := sessions()
	for name, req := range map[string]gateproto.GateLoginRequest{
		"stale":          assertion(kp, pub, now.Add(-2*time.Minute)),
		"another signer": assertion(stranger, pub, now),
		"not registered": assertion(stranger, strangerPub, now),
	} {
		if _, err := login(req, "k-"+name); api.CodeOf(err) != api.CodeUnauthenticated {
			t.Errorf("%s: %v; want unauthenticated", name, err)
		}
	}
	if n := sessions(); n != before {
		t.Fatalf("%d sessions after the refusals; want %d", n, before)
	}
	out, err := login(assertion(kp, pub, now), "k-ok")
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	var resp api.LoginResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	if !resp.ExpiresAt.Equal(now.Add(gate.SessionTTL)) || resp.User.Email != "sshgate@"+identity.ServiceDomain {
		t.Fatalf("login: %+v; want sshgate's session until %s", resp, now.Add(gate.SessionTTL))
	}
	var action string
	if err := w.pool.QueryRow(ctx, `SELECT action FROM audit_logs WHERE target_id = $1 AND idempotency_key = 'k-ok'`, resp.SessionID).Scan(&action); err != nil ||
		action != gateproto.EndpointGateLogin {
		t.Fatalf("login's audit row: %q, %v", action, err)
	}
}
