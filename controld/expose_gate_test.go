package controld_test

import (
	"errors"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestGateAuthorizeHTTP: the HTTPS front's verdicts follow SSH's rules —
// the creator alone (me), owners and members (project), anyone (public);
// a logout, a disabled account, a removal, an expiry and a release each
// end access; an allowed request with a ticket key gets a ticket for the
// allocation's node; only the gateway may ask.
func TestGateAuthorizeHTTP(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	a := activeAlloc(t, env, admin)
	member, _ := env.AddUser(t, "member@example.test", api.RoleUser)
	_, viewerToken := env.AddUser(t, "viewer@example.test", api.RoleUser)
	_, strangerToken := env.AddUser(t, "stranger@example.test", api.RoleUser)
	for _, m := range []struct{ email, role string }{{member.Email, api.ProjectMember}, {"viewer@example.test", api.ProjectViewer}} {
		if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Email: m.email, Role: m.role}); err != nil {
			t.Fatal(err)
		}
	}
	login, err := env.AnonClient().Login(ctx, api.LoginRequest{Email: member.Email, Password: "another good password"})
	if err != nil {
		t.Fatal(err)
	}
	memberToken := login.Token
	mc := env.Client(memberToken)
	if _, err := mc.ProjectUse(ctx, controldtest.ProjectName); err != nil {
		t.Fatal(err)
	}
	expose := func(c *api.Client, port int, share string) api.Exposure {
		t.Helper()
		e, err := c.ExposeCreate(ctx, api.ExposeCreateRequest{Allocation: a.ID, Port: port, Share: share, TTL: "1h"})
		if err != nil {
			t.Fatal(err)
		}
		return *e
	}
	mine := expose(mc, 8888, api.ShareMe)
	shared := expose(admin, 8889, api.ShareProject)
	public := expose(admin, 8890, api.SharePublic)
	tok, err := admin.TokenCreate(ctx, api.TokenCreateRequest{Name: "ci-run", Role: api.ProjectMember, TTL: "1d"})
	if err != nil {
		t.Fatal(err)
	}
	gw := gatewayClient(t, env)
	verdict := func(t *testing.T, req gateproto.GateAuthorizeHTTPRequest) *gateproto.GateAuthorizeHTTPResponse {
		t.Helper()
		v, err := gateproto.GateAuthorizeHTTP(ctx, gw, req)
		if err != nil {
			t.Fatalf("gate.authorize_http %+v: %v", req, err)
		}
		return v
	}

	tests := []struct {
		name string
		req  gateproto.GateAuthorizeHTTPRequest
		want string
	}{
		{"me: its creator", gateproto.GateAuthorizeHTTPRequest{Host: mine.Host, Bearer: memberToken}, gateproto.VerdictAllow},
		{"me: its creator's cookie", gateproto.GateAuthorizeHTTPRequest{Host: mine.Host, SessionID: login.SessionID, UserID: member.ID}, gateproto.VerdictAllow},
		{"me: a project owner", gateproto.GateAuthorizeHTTPRequest{Host: mine.Host, Bearer: env.AdminToken}, gateproto.VerdictForbidden},
		{"me: nobody", gateproto.GateAuthorizeHTTPRequest{Host: mine.Host}, gateproto.VerdictLogin},
		{"me: a forged bearer", gateproto.GateAuthorizeHTTPRequest{Host: mine.Host, Bearer: "not.a.token"}, gateproto.VerdictLogin},
		{"me: a cookie naming another's session", gateproto.GateAuthorizeHTTPRequest{Host: mine.Host, SessionID: login.SessionID, UserID: env.Admin.ID}, gateproto.VerdictLogin},
		{"project: a member", gateproto.GateAuthorizeHTTPRequest{Host: shared.Host, Bearer: memberToken}, gateproto.VerdictAllow},
		{"project: a member token", gateproto.GateAuthorizeHTTPRequest{Host: shared.Host, Bearer: tok.Secret}, gateproto.VerdictAllow},
		{"project: a viewer", gateproto.GateAuthorizeHTTPRequest{Host: shared.Host, Bearer: viewerToken}, gateproto.VerdictForbidden},
		{"project: a stranger", gateproto.GateAuthorizeHTTPRequest{Host: shared.Host, Bearer: strangerToken}, gateproto.VerdictForbidden},
		{"public: nobody", gateproto.GateAuthorizeHTTPRequest{Host: public.Host}, gateproto.VerdictAllow},
		{"never exposed", gateproto.GateAuthorizeHTTPRequest{Host: api.ExposureHost(a.ID, 9999), Bearer: memberToken}, gateproto.VerdictNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := verdict(t, tt.req)
			if v.Verdict != tt.want {
				t.Fatalf("got %s (%s); want %s", v.Verdict, v.Reason, tt.want)
			}
			if d := time.Until(v.CacheUntil); d > gateproto.MaxHTTPVerdictCache {
				t.Errorf("cache for %s; want at most %s", d, gateproto.MaxHTTPVerdictCache)
			}
		})
	}

	t.Run("ticket", func(t *testing.T) {
		key, line := newSSHKey(t)
		v := verdict(t, gateproto.GateAuthorizeHTTPRequest{Host: mine.Host, Bearer: memberToken, TicketKey: line})
		if v.Verdict != gateproto.VerdictAllow || v.Auth == nil || v.UserID != member.ID || v.SessionID != login.SessionID {
			t.Fatalf("got %+v; want allowed for %s with a ticket", v, member.ID)
		}
		cert := parseCert(t, v.Auth.Ticket)
		if string(cert.Key.Marshal()) != string(key.Marshal()) {
			t.Fatal("the ticket is for another key")
		}
		cas, err := gw.SSHCAs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := sshcert.VerifyTicket(trusted(t, cas.Internal), cert, a.NodeID, time.Now())
		if err != nil || tk.Allocation != a.ID || v.Auth.TerminalAddr != terminalAddr {
			t.Fatalf("ticket %+v, %v at %s; want one for %s at %s", tk, err, v.Auth.TerminalAddr, a.ID, terminalAddr)
		}
		if n := count(t, env, `SELECT count(*) FROM audit_logs WHERE action = 'gate.authorize_http' AND target_id = $1`, a.ID); n != 1 {
			t.Errorf("audit rows of tickets: got %d; want 1", n)
		}
		denied := verdict(t, gateproto.GateAuthorizeHTTPRequest{Host: mine.Host, Bearer: env.AdminToken, TicketKey: line})
		if denied.Verdict != gateproto.VerdictForbidden || denied.Auth != nil {
			t.Fatalf("a denied request with a ticket key: got %+v; want forbidden, no ticket", denied)
		}
	})

	t.Run("refused requests", func(t *testing.T) {
		for _, req := range []gateproto.GateAuthorizeHTTPRequest{{Host: "nonsense"}, {Host: "80-" + a.ID},
			{Host: mine.Host, SessionID: login.SessionID}, {Host: mine.Host, Bearer: memberToken, TicketKey: "nope"}} {
			if _, err := gateproto.GateAuthorizeHTTP(ctx, gw, req); !errors.Is(err, api.ErrInvalidArgument) {
				t.Errorf("%+v: got %v; want invalid argument", req, err)
			}
		}
		if _, err := gateproto.GateAuthorizeHTTP(ctx, mc, gateproto.GateAuthorizeHTTPRequest{Host: mine.Host, Bearer: memberToken}); !errors.Is(err, api.ErrForbidden) {
			t.Errorf("a user asking: got %v; want forbidden", err)
		}
	})

	// Endings, in turn: each refuses within 5 s, the acceptance's bound
	// (controld's session cache is dropped on revocation; polled).
	ended := func(t *testing.T, req gateproto.GateAuthorizeHTTPRequest, want string) {
		t.Helper()
		testutil.EventuallyWithin(t, 5*time.Second, "verdict "+want, func() bool { return verdict(t, req).Verdict == want })
	}
	t.Run("removed", func(t *testing.T) {
		if _, err := admin.ExposeRemove(ctx, api.ExposeRemoveRequest{Exposure: public.ID}); err != nil {
			t.Fatal(err)
		}
		ended(t, gateproto.GateAuthorizeHTTPRequest{Host: public.Host}, gateproto.VerdictGone)
	})
	t.Run("expired", func(t *testing.T) {
		again := expose(admin, 8891, api.SharePublic)
		if _, err := env.Server.Pool().Exec(ctx, `UPDATE exposures SET expires_at = now() - interval '1s' WHERE id = $1`, again.ID); err != nil {
			t.Fatal(err)
		}
		ended(t, gateproto.GateAuthorizeHTTPRequest{Host: again.Host}, gateproto.VerdictGone)
	})
	t.Run("logout", func(t *testing.T) {
		if _, err := mc.Logout(ctx); err != nil {
			t.Fatal(err)
		}
		ended(t, gateproto.GateAuthorizeHTTPRequest{Host: mine.Host, Bearer: memberToken}, gateproto.VerdictLogin)
		ended(t, gateproto.GateAuthorizeHTTPRequest{Host: mine.Host, SessionID: login.SessionID, UserID: member.ID}, gateproto.VerdictLogin)
	})
	t.Run("disabled", func(t *testing.T) {
		again := env.Login(t, member.Email, "another good password")
		if v := verdict(t, gateproto.GateAuthorizeHTTPRequest{Host: shared.Host, Bearer: again}); v.Verdict != gateproto.VerdictAllow {
			t.Fatalf("a new login: got %s; want allow", v.Verdict)
		}
		if _, err := admin.AdminUserDisable(ctx, member.Email); err != nil {
			t.Fatal(err)
		}
		ended(t, gateproto.GateAuthorizeHTTPRequest{Host: shared.Host, Bearer: again}, gateproto.VerdictLogin)
	})
	t.Run("released", func(t *testing.T) {
		setAllocState(t, env, a.ID, api.AllocReleasing)
		ended(t, gateproto.GateAuthorizeHTTPRequest{Host: shared.Host, Bearer: env.AdminToken}, gateproto.VerdictGone)
	})
}
