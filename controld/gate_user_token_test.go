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
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// userCert has c's user mint a certificate for a fresh key (as `gpuaas
// login` does) and returns it in authorized_keys format.
func userCert(t *testing.T, c *api.Client) string {
	t.Helper()
	_, line := newSSHKey(t)
	resp, err := c.SSHCert(t.Context(), api.SSHCertRequest{PublicKey: line})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Certificate
}

// TestGateUserToken: the gateway exchanges a user's certificate for a
// delegated session that acts as the user for ordinary calls, mints
// nothing, reaches no ops.* endpoint, and lives at most 15 minutes.
func TestGateUserToken(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, SSHCertTTL: time.Hour})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	bob, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	gw := gatewayClient(t, env)
	if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Email: bob.Email, Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}

	cert := userCert(t, env.Client(bobToken))
	before := time.Now()
	resp, err := gateproto.GateUserToken(ctx, gw, gateproto.GateUserTokenRequest{UserID: bob.ID, Certificate: cert})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if resp.User.ID != bob.ID || resp.Token == "" {
		t.Fatalf("got user %s token %q; want %s and a token", resp.User.ID, resp.Token, bob.ID)
	}
	// controld stamps the expiry between before and after, in whole
	// seconds.
	if max := after.Add(15*time.Minute + time.Second); resp.ExpiresAt.After(max) || resp.ExpiresAt.Before(before.Add(14*time.Minute)) {
		t.Errorf("expires at %s; want about 15 minutes from %s (the certificate lives an hour)", resp.ExpiresAt, before)
	}
	if strings.Contains(cert, resp.Token) {
		t.Fatal("token leaked into the certificate?")
	}

	bc := env.Client(resp.Token)
	who, err := bc.Whoami(ctx)
	if err != nil {
		t.Fatalf("whoami with the delegated token: %v", err)
	}
	if who.User.ID != bob.ID || who.User.Email != bob.Email {
		t.Errorf("whoami got %s %s; want %s %s", who.User.ID, who.User.Email, bob.ID, bob.Email)
	}
	if _, err := bc.AllocList(ctx, api.AllocListRequest{}); err != nil {
		t.Errorf("alloc list with the delegated token: %v", err)
	}
	_, line := newSSHKey(t)
	if _, err := bc.SSHCert(ctx, api.SSHCertRequest{PublicKey: line}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("auth.ssh_cert with a delegated token got %v; want forbidden", err)
	}

	// An admin's delegated session is refused what the admin could do.
	ac := env.Client(mustUserToken(t, gw, env.Admin.ID, userCert(t, admin)))
	_, evilPub := newNkey(t)
	if _, err := ac.BusIdentityAdd(ctx, api.BusIdentityAddRequest{PublicKey: evilPub, Kind: api.BusIdentityGateway, Name: "evil"}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("ops.bus_identity_add with an admin's delegated token got %v; want forbidden", err)
	}
	if _, err := ac.CAList(ctx, api.CAListRequest{}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("ops.ca_list with an admin's delegated token got %v; want forbidden", err)
	}
	if _, err := ac.SSHCert(ctx, api.SSHCertRequest{PublicKey: line}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("auth.ssh_cert with an admin's delegated token got %v; want forbidden", err)
	}
	if _, err := admin.CAList(ctx, api.CAListRequest{}); err != nil {
		t.Errorf("ops.ca_list with the admin's own token: %v", err)
	}

	var audits int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_logs WHERE action = 'gate.user_token' AND target_id = $1`,
		bob.ID).Scan(&audits); err != nil || audits != 1 {
		t.Errorf("got %d gate.user_token audit rows for bob (%v); want 1", audits, err)
	}
	var leaked int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_logs WHERE detail::text LIKE '%' || $1 || '%'`,
		resp.Token).Scan(&leaked); err != nil || leaked != 0 {
		t.Errorf("the token is in %d audit rows (%v); want none", leaked, err)
	}

	// Refusals.
	alice, aliceToken := env.AddUser(t, "alice@example.test", api.RoleUser)
	_, foreignPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := sshcert.New("user", foreignPriv)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := newSSHKey(t)
	fc, err := foreign.SignUser(pub, sshcert.UserCert{UserID: bob.ID, KeyID: bob.Email, MaxTTL: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	foreignCert := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(fc)))
	_, plainKey := newSSHKey(t)
	tests := []struct {
		name string
		c    *api.Client
		user string
		cert string
		want error
	}{
		{"another CA", gw, bob.ID, foreignCert, api.ErrForbidden},
		{"another user's certificate", gw, bob.ID, userCert(t, env.Client(aliceToken)), api.ErrForbidden},
		{"a certificate for someone else", gw, alice.ID, cert, api.ErrForbidden},
		{"a plain key", gw, bob.ID, plainKey, api.ErrForbidden},
		{"not a key", gw, bob.ID, "hello", api.ErrInvalidArgument},
		{"not the gateway", admin, bob.ID, cert, api.ErrForbidden},
		{"the user themselves", env.Client(bobToken), bob.ID, cert, api.ErrForbidden},
		{"a delegated session", bc, bob.ID, cert, api.ErrForbidden},
		{"not logged in", env.Client(""), bob.ID, cert, api.ErrUnauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := gateproto.GateUserToken(ctx, tt.c, gateproto.GateUserTokenRequest{UserID: tt.user, Certificate: tt.cert}); !errors.Is(err, tt.want) {
				t.Fatalf("got %v; want %v", err, tt.want)
			}
		})
	}
}

func mustUserToken(t *testing.T, gw *api.Client, userID, cert string) string {
	t.Helper()
	resp, err := gateproto.GateUserToken(t.Context(), gw, gateproto.GateUserTokenRequest{UserID: userID, Certificate: cert})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Token
}

// TestGateUserTokenCertBound: a certificate that ends before 15 minutes
// ends the delegated session with it.
func TestGateUserTokenCertBound(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, SSHCertTTL: 5 * time.Minute})
	ctx := t.Context()
	bob, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	cert := userCert(t, env.Client(bobToken))
	resp, err := gateproto.GateUserToken(ctx, gatewayClient(t, env), gateproto.GateUserTokenRequest{UserID: bob.ID, Certificate: cert})
	if err != nil {
		t.Fatal(err)
	}
	vb := time.Unix(int64(parseCert(t, cert).ValidBefore), 0)
	if resp.ExpiresAt.After(vb) || vb.Sub(resp.ExpiresAt) > time.Second {
		t.Errorf("expires at %s; want the certificate's end %s", resp.ExpiresAt, vb)
	}
	if _, err := env.Client(resp.Token).Whoami(ctx); err != nil {
		t.Errorf("whoami: %v", err)
	}
}
