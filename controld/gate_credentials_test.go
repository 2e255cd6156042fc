package controld_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

func newKeyLine(t *testing.T) string {
	t.Helper()
	k, err := sshcert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
}

// TestGateCredentials: the gateway gets a gateway certificate of the
// internal CA for a key an admin registered, and for no other key (the
// regression test of "a stolen gateway token gave a shell": the token alone
// cannot certify a key of its own); nobody but the gateway may ask; a
// revoked key gets none; every call is audited.
func TestGateCredentials(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	_, userToken := env.AddUser(t, "user@example.test", api.RoleUser)
	_, opToken := env.AddUser(t, "op@example.test", api.RoleOperator)
	gw := gatewayClient(t, env)
	registered, stranger := newKeyLine(t), newKeyLine(t)

	if _, err := env.Client(userToken).GatewayKeyAdd(ctx, api.GatewayKeyAddRequest{Name: "gw-1", PublicKey: registered}); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("a user registering a gateway key: got %v; want forbidden", err)
	}
	if _, err := gw.GatewayKeyAdd(ctx, api.GatewayKeyAddRequest{Name: "gw-1", PublicKey: stranger}); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("the gateway registering its own key: got %v; want forbidden", err)
	}
	k, err := admin.GatewayKeyAdd(ctx, api.GatewayKeyAddRequest{Name: "gw-1", PublicKey: registered + " comment"})
	if err != nil {
		t.Fatal(err)
	}
	if k.Name != "gw-1" || k.PublicKey != registered || k.CreatedBy != env.Admin.ID || !strings.HasPrefix(k.ID, "SHA256:") {
		t.Fatalf("registered %+v; want gw-1, the key without its comment, by the admin", k)
	}
	for _, tt := range []struct {
		name string
		req  api.GatewayKeyAddRequest
		want error
	}{
		{"same key again", api.GatewayKeyAddRequest{Name: "gw-2", PublicKey: registered}, api.ErrConflict},
		{"same name in use", api.GatewayKeyAddRequest{Name: "gw-1", PublicKey: newKeyLine(t)}, api.ErrConflict},
		{"bad name", api.GatewayKeyAddRequest{Name: "gw 1", PublicKey: newKeyLine(t)}, api.ErrInvalidArgument},
		{"not a key", api.GatewayKeyAddRequest{Name: "gw-3", PublicKey: "ssh-ed25519 nope"}, api.ErrInvalidArgument},
	} {
		if _, err := admin.GatewayKeyAdd(ctx, tt.req); !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v; want %v", tt.name, err, tt.want)
		}
	}

	cas, err := gw.SSHCAs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := gw.GateCredentials(ctx, api.GateCredentialsRequest{PublicKey: registered})
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
		{"an admin", admin, registered, api.ErrForbidden},
		{"a user", env.Client(userToken), registered, api.ErrForbidden},
		{"not logged in", env.Client(""), registered, api.ErrUnauthenticated},
		{"not a key", gw, "nope", api.ErrInvalidArgument},
	} {
		if _, err := tt.c.GateCredentials(ctx, api.GateCredentialsRequest{PublicKey: tt.key}); !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v; want %v", tt.name, err, tt.want)
		}
	}

	list, err := env.Client(opToken).GatewayKeyList(ctx, api.GatewayKeyListRequest{})
	if err != nil || len(list.Keys) != 1 || list.Keys[0].ID != k.ID {
		t.Fatalf("operator's list: %+v, %v; want the one key", list, err)
	}
	if _, err := env.Client(userToken).GatewayKeyList(ctx, api.GatewayKeyListRequest{}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("a user listing gateway keys: got %v; want forbidden", err)
	}
	revoked, err := admin.GatewayKeyRevoke(ctx, api.GatewayKeyRef{Key: "gw-1"})
	if err != nil || revoked.RevokedAt == nil || revoked.ID != k.ID {
		t.Fatalf("revoke: %+v, %v", revoked, err)
	}
	if _, err := gw.GateCredentials(ctx, api.GateCredentialsRequest{PublicKey: registered}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("revoked key: got %v; want forbidden", err)
	}
	if _, err := admin.GatewayKeyRevoke(ctx, api.GatewayKeyRef{Key: k.ID}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("revoking twice: got %v; want not found", err)
	}
	if _, err := admin.GatewayKeyAdd(ctx, api.GatewayKeyAddRequest{Name: "gw-1", PublicKey: registered}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("re-registering a revoked key: got %v; want conflict", err)
	}
	if _, err := admin.GatewayKeyAdd(ctx, api.GatewayKeyAddRequest{Name: "gw-1", PublicKey: stranger}); err != nil {
		t.Errorf("a new key under the revoked key's name: %v", err)
	}
	all, err := admin.GatewayKeyList(ctx, api.GatewayKeyListRequest{Revoked: true})
	if err != nil || len(all.Keys) != 2 {
		t.Errorf("list with revoked keys: %+v, %v; want 2", all, err)
	}

	var issued, refused, added, revokes int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE action = 'gate.credentials'),
		count(*) FILTER (WHERE action = 'gate.credentials_refused'),
		count(*) FILTER (WHERE action = 'ops.gateway_key_add'),
		count(*) FILTER (WHERE action = 'ops.gateway_key_revoke') FROM audit_logs`).Scan(&issued, &refused, &added, &revokes); err != nil {
		t.Fatal(err)
	}
	if issued != 1 || refused != 2 || added != 2 || revokes != 1 {
		t.Errorf("audit: %d issued, %d refused, %d added, %d revoked; want 1, 2, 2, 1", issued, refused, added, revokes)
	}
}

// TestRegisterGatewayKeyReplace: what `gpuaas dev` does at every start
// keeps the key it registered before, and a new key replaces (revokes) the
// old one under the same name.
func TestRegisterGatewayKeyReplace(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	first, second := newKeyLine(t), newKeyLine(t)
	register := func(line string) *api.GatewayKey {
		t.Helper()
		k, err := env.Server.RegisterGatewayKey(ctx, api.GatewayKeyAddRequest{Name: "sshgate-dev", PublicKey: line}, env.Admin.ID, true)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a := register(first)
	if again := register(first); again.ID != a.ID || !again.CreatedAt.Equal(a.CreatedAt) {
		t.Errorf("registering the same key again: got %+v; want %+v kept", again, a)
	}
	b := register(second)
	keys, err := env.Client(env.AdminToken).GatewayKeyList(ctx, api.GatewayKeyListRequest{Revoked: true})
	if err != nil {
		t.Fatal(err)
	}
	var inUse []string
	for _, k := range keys.Keys {
		if k.RevokedAt == nil {
			inUse = append(inUse, k.ID)
		}
	}
	if len(keys.Keys) != 2 || len(inUse) != 1 || inUse[0] != b.ID {
		t.Errorf("got keys %+v; want the first revoked and only %s in use", keys.Keys, b.ID)
	}
	if _, err := env.Server.RegisterGatewayKey(ctx, api.GatewayKeyAddRequest{Name: "sshgate-dev", PublicKey: newKeyLine(t)}, env.Admin.ID, false); !errors.Is(err, api.ErrConflict) {
		t.Errorf("without replace: got %v; want conflict", err)
	}
}
