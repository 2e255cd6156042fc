package controld_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// gatewayIdentity makes an Ed25519 key and returns it as an SSH
// authorized_keys line and as the nkey it is on the bus.
func gatewayIdentity(t *testing.T) (line, nkey string) {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	nk, err := bus.PublicKeyNkey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))), nk
}

// TestGateCredentials: a gateway gets a gateway certificate of the
// internal CA for a key registered as its own NATS identity (kind gateway,
// its name), and for no other key — not an unregistered one (the
// regression test of "a stolen gateway token gave a shell": the token
// alone cannot certify a key of its own), not another gateway's, not an
// operator's, not a revoked one; nobody but a gateway may ask; every call
// is audited.
func TestGateCredentials(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	_, userToken := env.AddUser(t, "user@example.test", api.RoleUser)
	gw := env.GatewayClient(t, "gw-1")
	register := func(nk, kind, name string) {
		t.Helper()
		if _, err := admin.BusIdentityAdd(ctx, api.BusIdentityAddRequest{PublicKey: nk, Kind: kind, Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	own, ownNK := gatewayIdentity(t)
	register(ownNK, api.BusIdentityGateway, "gw-1")
	other, otherNK := gatewayIdentity(t)
	register(otherNK, api.BusIdentityGateway, "gw-2")
	operator, operatorNK := gatewayIdentity(t)
	register(operatorNK, api.BusIdentityOperator, "gw-1")
	stranger, _ := gatewayIdentity(t)
	cas, err := gw.SSHCAs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := gateproto.GateCredentials(ctx, gw, gateproto.GateCredentialsRequest{PublicKey: own})
	if err != nil {
		t.Fatal(err)
	}
	cert, _, _, _, err := ssh.ParseAuthorizedKey([]byte(resp.Certificate))
	if err != nil {
		t.Fatal(err)
	}
	id, err := sshcert.VerifyGateway(trusted(t, cas.Internal), cert, time.Now())
	if err != nil {
		t.Fatalf("the certificate is no gateway certificate of the internal CA: %v", err)
	}
	if id.Name != "gw-1" || resp.Name != "gw-1" || !id.ValidBefore.Equal(resp.ValidBefore) ||
		resp.ValidBefore.After(time.Now().Add(sshcert.DefaultGatewayTTL+time.Second)) {
		t.Errorf("got %+v (%+v); want gw-1 for at most %s", id, resp, sshcert.DefaultGatewayTTL)
	}

	for _, tt := range []struct {
		name string
		c    *api.Client
		key  string
		want error
	}{
		{"unregistered key", gw, stranger, api.ErrForbidden},
		{"another gateway's key", gw, other, api.ErrForbidden},
		{"an operator's key", gw, operator, api.ErrForbidden},
		{"an admin", admin, own, api.ErrForbidden},
		{"a user", env.Client(userToken), own, api.ErrForbidden},
		{"not logged in", env.Client(""), own, api.ErrUnauthenticated},
		{"not a key", gw, "nope", api.ErrInvalidArgument},
		{"a certificate", gw, string(ssh.MarshalAuthorizedKey(cert)), api.ErrInvalidArgument},
	} {
		if _, err := gateproto.GateCredentials(ctx, tt.c, gateproto.GateCredentialsRequest{PublicKey: tt.key}); !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v; want %v", tt.name, err, tt.want)
		}
	}
	if _, err := admin.BusIdentityRevoke(ctx, api.BusIdentityRevokeRequest{PublicKey: ownNK}); err != nil {
		t.Fatal(err)
	}
	if _, err := gateproto.GateCredentials(ctx, gw, gateproto.GateCredentialsRequest{PublicKey: own}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("revoked key: got %v; want forbidden", err)
	}

	var issued, refused int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE action = 'gate.credentials'),
		count(*) FILTER (WHERE action = 'gate.credentials_refused') FROM audit_logs`).Scan(&issued, &refused); err != nil {
		t.Fatal(err)
	}
	if issued != 1 || refused != 4 {
		t.Errorf("audit: %d issued, %d refused; want 1, 4", issued, refused)
	}
}
