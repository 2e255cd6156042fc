package controld_test

import (
	"context"
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

// sessionOf is the login session a certificate names.
func sessionOf(t *testing.T, cert string) string {
	t.Helper()
	sid := parseCert(t, cert).Extensions[sshcert.ExtensionSessionID]
	if sid == "" {
		t.Fatalf("certificate names no session: %s", cert)
	}
	return sid
}

// userCAAuthority is controld's user CA as it signs now, read from
// ssh_ca_keys (stored unsealed here), for certificates controld would not
// mint itself.
func userCAAuthority(t *testing.T, env *controldtest.Env) *sshcert.Authority {
	t.Helper()
	var pemBytes []byte
	if err := env.Server.Pool().QueryRow(t.Context(), `SELECT private_key FROM ssh_ca_keys WHERE ca = 'user' AND active`).
		Scan(&pemBytes); err != nil {
		t.Fatal(err)
	}
	k, err := sshcert.ParsePrivateKey(pemBytes, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := sshcert.New(api.CAUser, k)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func expireSession(t *testing.T, env *controldtest.Env, sid string) {
	t.Helper()
	if _, err := env.Server.Pool().Exec(context.Background(), `UPDATE sessions SET expires_at = now() - interval '1 second' WHERE id = $1`, sid); err != nil {
		t.Fatal(err)
	}
}

// TestGateRefusesEndedLogins: a certificate opens nothing through the
// gateway (no ticket, no delegated session) once the login it was minted
// under is logged out or has expired, while the same user's other logins
// keep working; a certificate naming no login is refused too.
func TestGateRefusesEndedLogins(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	a := activeAlloc(t, env, admin)
	gw := gatewayClient(t, env)
	bob, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Email: bob.Email, Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}
	laptop := userCert(t, env.Client(bobToken))
	otherToken := env.Login(t, bob.Email, "another good password")
	desktop := userCert(t, env.Client(otherToken))
	expiring := userCert(t, env.Client(env.Login(t, bob.Email, "another good password")))

	authorize := func(cert string) error {
		_, line := newSSHKey(t)
		_, err := gateproto.GateAuthorize(ctx, gw, gateproto.GateAuthorizeRequest{AllocationID: a.ID, UserID: bob.ID, TicketKey: line, Certificate: cert})
		return err
	}
	userToken := func(cert string) error {
		_, err := gateproto.GateUserToken(ctx, gw, gateproto.GateUserTokenRequest{UserID: bob.ID, Certificate: cert})
		return err
	}
	for _, cert := range []string{laptop, desktop, expiring} {
		if err := authorize(cert); err != nil {
			t.Fatalf("before logout: %v", err)
		}
	}

	if _, err := env.Client(bobToken).Logout(ctx); err != nil {
		t.Fatal(err)
	}
	expireSession(t, env, sessionOf(t, expiring))
	noSession, err := userCAAuthority(t, env).SignUser(mustKey(t), sshcert.UserCert{UserID: bob.ID, KeyID: bob.Email, MaxTTL: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cert    string
		wantErr string // empty: accepted
	}{
		{"logged out", laptop, "this login was ended (logged out / disabled)"},
		{"expired", expiring, "this login has expired"},
		{"names no login", strings.TrimSpace(string(ssh.MarshalAuthorizedKey(noSession))), "names no login session"},
		{"the user's other login", desktop, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for what, call := range map[string]func(string) error{"gate.authorize": authorize, "gate.user_token": userToken} {
				err := call(tt.cert)
				if tt.wantErr == "" {
					if err != nil {
						t.Errorf("%s: got %v; want accepted", what, err)
					}
					continue
				}
				var apiErr *api.Error
				if !errors.Is(err, api.ErrForbidden) || !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, tt.wantErr) ||
					!strings.Contains(apiErr.Message, "run `gpuaas login`") || !strings.Contains(apiErr.Hint, "gpuaas login") {
					t.Errorf("%s: got %v; want forbidden with %q and a hint to log in", what, err, tt.wantErr)
				}
			}
		})
	}
	var refused int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_logs WHERE action = 'gate.authorize_refused'
		AND detail->'request'->>'session_id' = $1`, sessionOf(t, laptop)).Scan(&refused); err != nil || refused != 1 {
		t.Errorf("got %d audited refusals naming the logged-out session (%v); want 1", refused, err)
	}
}

func mustKey(t *testing.T) ssh.PublicKey {
	k, _ := newSSHKey(t)
	return k
}

// TestGateSessions: one request tells the gateway which of many sessions
// have ended, and why; live ones are not listed.
func TestGateSessions(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	gw := gatewayClient(t, env)
	bob, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	live := sessionOf(t, userCert(t, env.Client(bobToken)))
	revokedToken := env.Login(t, bob.Email, "another good password")
	revoked := sessionOf(t, userCert(t, env.Client(revokedToken)))
	if _, err := env.Client(revokedToken).Logout(ctx); err != nil {
		t.Fatal(err)
	}
	expired := sessionOf(t, userCert(t, env.Client(env.Login(t, bob.Email, "another good password"))))
	expireSession(t, env, expired)
	adminLive := sessionOf(t, userCert(t, env.Client(env.AdminToken)))
	delegated, err := gateproto.GateUserToken(ctx, gw, gateproto.GateUserTokenRequest{UserID: bob.ID, Certificate: userCert(t, env.Client(bobToken))})
	if err != nil {
		t.Fatal(err)
	}

	req := gateproto.GateSessionsRequest{Sessions: []gateproto.GateSession{
		{SessionID: live, UserID: bob.ID},
		{SessionID: revoked, UserID: bob.ID},
		{SessionID: expired, UserID: bob.ID},
		{SessionID: "s-000000000000", UserID: bob.ID},
		{SessionID: adminLive, UserID: bob.ID}, // someone else's
		{SessionID: adminLive, UserID: env.Admin.ID},
		{SessionID: delegated.SessionID, UserID: bob.ID}, // never a certificate's
	}}
	resp, err := gateproto.GateSessions(ctx, gw, req)
	if err != nil {
		t.Fatal(err)
	}
	want := []gateproto.GateSessionEnded{
		{GateSession: req.Sessions[1], Reason: gateproto.SessionEndedRevoked},
		{GateSession: req.Sessions[2], Reason: gateproto.SessionEndedExpired},
		{GateSession: req.Sessions[3], Reason: gateproto.SessionEndedUnknown},
		{GateSession: req.Sessions[4], Reason: gateproto.SessionEndedUnknown},
		{GateSession: req.Sessions[6], Reason: gateproto.SessionEndedUnknown},
	}
	if len(resp.Ended) != len(want) {
		t.Fatalf("got %+v; want %+v", resp.Ended, want)
	}
	for i := range want {
		if resp.Ended[i] != want[i] {
			t.Errorf("ended[%d]: got %+v; want %+v", i, resp.Ended[i], want[i])
		}
	}

	if resp, err := gateproto.GateSessions(ctx, gw, gateproto.GateSessionsRequest{}); err != nil || len(resp.Ended) != 0 {
		t.Errorf("no sessions: got %+v, %v; want none ended", resp, err)
	}
	tooMany := make([]gateproto.GateSession, gateproto.MaxGateSessions+1)
	for i := range tooMany {
		tooMany[i] = gateproto.GateSession{SessionID: live, UserID: bob.ID}
	}
	refusals := []struct {
		name string
		c    *api.Client
		req  gateproto.GateSessionsRequest
		want error
	}{
		{"too many", gw, gateproto.GateSessionsRequest{Sessions: tooMany}, api.ErrInvalidArgument},
		{"no session id", gw, gateproto.GateSessionsRequest{Sessions: []gateproto.GateSession{{UserID: bob.ID}}}, api.ErrInvalidArgument},
		{"not the gateway", env.Client(env.AdminToken), req, api.ErrForbidden},
		{"the user", env.Client(bobToken), req, api.ErrForbidden},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := gateproto.GateSessions(ctx, tt.c, tt.req); !errors.Is(err, tt.want) {
				t.Fatalf("got %v; want %v", err, tt.want)
			}
		})
	}
}
