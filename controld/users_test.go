package controld_test

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// tableDigest is a digest of the rows of the identity tables, to check
// that refused requests changed nothing.
func tableDigest(t *testing.T, env *controldtest.Env) string {
	t.Helper()
	var out []string
	for _, table := range []string{"users", "sessions", "user_invites", "project_members"} {
		var d string
		if err := env.Server.Pool().QueryRow(t.Context(),
			`SELECT md5(coalesce(string_agg(r::text, ',' ORDER BY r::text), '')) FROM `+table+` r`).Scan(&d); err != nil {
			t.Fatal(err)
		}
		out = append(out, table+"="+d)
	}
	return strings.Join(out, " ")
}

// revokedEvents returns the payloads of the session.revoked events.
func revokedEvents(t *testing.T, env *controldtest.Env) []api.SessionRevoked {
	t.Helper()
	rows, err := env.Server.Pool().Query(t.Context(), `SELECT payload FROM outbox_events WHERE kind = $1 ORDER BY id`,
		api.EventSessionRevoked)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []api.SessionRevoked
	for rows.Next() {
		var raw []byte
		var ev api.SessionRevoked
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

func findUser(t *testing.T, c *api.Client, email string) api.AdminUser {
	t.Helper()
	list, err := c.AdminUserList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range list.Users {
		if u.Email == email {
			return u
		}
	}
	t.Fatalf("user list has no %s: %+v", email, list.Users)
	return api.AdminUser{}
}

// TestInviteFlow: an admin adds a user, who is a project member before
// ever logging in, redeems the invite once, and logs in with the password
// set; a re-invite replaces the code and resets the password, ending the
// sessions opened with the old one.
func TestInviteFlow(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Now())
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, Now: clock.Now})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	anon := env.AnonClient()

	added, err := admin.AdminUserAdd(ctx, api.UserAddRequest{Email: "ada@example.test", Name: "Ada L", Role: api.RoleOperator})
	if err != nil {
		t.Fatal(err)
	}
	if u := added.User; u.State != api.UserInvited || u.Role != api.RoleOperator || u.Provider != "local" || u.Name != "Ada L" {
		t.Fatalf("added %+v; want an invited local operator named Ada L", u)
	}
	if want := clock.Now().Add(7 * 24 * time.Hour); added.Invite.Code == "" || added.Invite.ExpiresAt.Sub(want).Abs() > time.Second {
		t.Fatalf("invite %+v; want a code expiring at %v", added.Invite, want)
	}
	// Only the code's hash is kept, and no log holds the code.
	code := added.Invite.Code
	sum := sha256.Sum256([]byte(code))
	if n := count(t, env, `SELECT count(*) FROM user_invites WHERE code_hash = $1`, sum[:]); n != 1 {
		t.Fatalf("invites with the code's hash: got %d; want 1", n)
	}
	for _, q := range []string{`SELECT count(*) FROM audit_logs WHERE detail::text LIKE '%' || $1 || '%'`,
		`SELECT count(*) FROM outbox_events WHERE payload::text LIKE '%' || $1 || '%'`,
		`SELECT count(*) FROM idempotency_keys WHERE coalesce(response::text, '') LIKE '%' || $1 || '%'`} {
		if n := count(t, env, q, code); n != 0 {
			t.Fatalf("%s: got %d rows holding the invite code; want none", q, n)
		}
	}

	// Invited, never logged in: already a project member.
	if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Project: env.Project.Name, Email: "ada@example.test",
		Role: api.ProjectMember}); err != nil {
		t.Fatalf("add the invited user to a project: %v", err)
	}
	// No password yet: a password login fails like any other.
	if _, err := anon.Login(ctx, api.LoginRequest{Email: "ada@example.test", Password: "anything at all"}); !errors.Is(err, api.ErrUnauthenticated) {
		t.Fatalf("password login of an invited user: got %v; want unauthenticated", err)
	}

	// Too short a password is refused before the code is used up.
	if _, err := anon.Login(ctx, api.LoginRequest{Invite: code, Password: "short"}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("redeem with a short password: got %v; want invalid_argument", err)
	}
	clock.Advance(time.Hour)
	first, err := anon.Login(ctx, api.LoginRequest{Invite: code, Password: "ada's first password"})
	if err != nil {
		t.Fatalf("redeem the invite: %v", err)
	}
	if first.User.Email != "ada@example.test" || first.User.Role != api.RoleOperator {
		t.Fatalf("redeemed as %+v; want ada, operator", first.User)
	}
	if _, err := env.Client(first.Token).ProjectMembers(ctx, env.Project.Name); err != nil {
		t.Fatalf("the new member reads the project: %v", err)
	}
	if _, err := anon.Login(ctx, api.LoginRequest{Invite: code, Password: "ada's other password"}); !errors.Is(err, api.ErrUnauthenticated) {
		t.Fatalf("redeem a used invite: got %v; want unauthenticated", err)
	}
	second, err := anon.Login(ctx, api.LoginRequest{Email: "ada@example.test", Password: "ada's first password"})
	if err != nil {
		t.Fatalf("password login after the invite: %v", err)
	}
	u := findUser(t, admin, "ada@example.test")
	if u.State != api.UserActive || u.LastLoginAt == nil || !u.LastLoginAt.Equal(clock.Now().UTC().Truncate(time.Microsecond)) || u.InviteExpiresAt != nil {
		t.Fatalf("after the login: %+v; want active, last login now, no invite", u)
	}

	// A re-invite replaces the code: the older one no longer works.
	older, err := admin.AdminUserInvite(ctx, "ada@example.test")
	if err != nil {
		t.Fatal(err)
	}
	newer, err := admin.AdminUserInvite(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anon.Login(ctx, api.LoginRequest{Invite: older.Invite.Code, Password: "ada's second password"}); !errors.Is(err, api.ErrUnauthenticated) {
		t.Fatalf("redeem a replaced invite: got %v; want unauthenticated", err)
	}
	reset, err := anon.Login(ctx, api.LoginRequest{Invite: newer.Invite.Code, Email: "ADA@example.test", Password: "ada's second password"})
	if err != nil {
		t.Fatalf("redeem the newer invite: %v", err)
	}
	// It reset the password and ended both earlier sessions.
	for _, tok := range []string{first.Token, second.Token} {
		if _, err := env.Client(tok).Whoami(ctx); !errors.Is(err, api.ErrUnauthenticated) {
			t.Fatalf("a session from before the reset: got %v; want unauthenticated", err)
		}
	}
	if _, err := env.Client(reset.Token).Whoami(ctx); err != nil {
		t.Fatal(err)
	}
	evs := revokedEvents(t, env)
	if len(evs) != 1 || evs[0].Reason != "password_reset" || evs[0].UserID != u.ID ||
		!sameSet(evs[0].SessionIDs, []string{first.SessionID, second.SessionID}) {
		t.Fatalf("session.revoked events: got %+v; want one naming %s and %s", evs, first.SessionID, second.SessionID)
	}
	if _, err := anon.Login(ctx, api.LoginRequest{Email: "ada@example.test", Password: "ada's first password"}); !errors.Is(err, api.ErrUnauthenticated) {
		t.Fatalf("the old password: got %v; want unauthenticated", err)
	}

	// An invite expires.
	late, err := admin.AdminUserAdd(ctx, api.UserAddRequest{Email: "late@example.test"})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(7*24*time.Hour + time.Second)
	before := tableDigest(t, env)
	_, err = anon.Login(ctx, api.LoginRequest{Invite: late.Invite.Code, Password: "a fine password"})
	if !errors.Is(err, api.ErrUnauthenticated) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("redeem an expired invite: got %v; want unauthenticated saying it expired", err)
	}
	if got := tableDigest(t, env); got != before {
		t.Fatalf("a refused redemption changed tables:\n%s\nwant\n%s", got, before)
	}
	if n := count(t, env, `SELECT count(*) FROM audit_logs WHERE action = 'auth.invite_redeem_refused'`); n != 3 {
		t.Fatalf("audited refused redemptions: got %d; want 3 (used, replaced, expired)", n)
	}
}

// TestUserDisable: disabling revokes every session of the user in the
// same transaction, says so in one session.revoked event, and refuses
// their tokens, logins and delegated sessions until enabled again.
func TestUserDisable(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	anon := env.AnonClient()
	bob, tok1 := env.AddUser(t, "bob@example.test", api.RoleUser)
	const pw = "another good password"
	tok2 := env.Login(t, bob.Email, pw)
	// A session already logged out is not revoked again.
	tok3 := env.Login(t, bob.Email, pw)
	if _, err := env.Client(tok3).Logout(ctx); err != nil {
		t.Fatal(err)
	}
	cert := userCert(t, env.Client(tok1))
	gw := gatewayClient(t, env)

	resp, err := admin.AdminUserDisable(ctx, "bob@example.test")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{claimsOf(t, tok1).ID, claimsOf(t, tok2).ID}
	if resp.User.State != api.UserDisabled || !sameSet(resp.RevokedSessions, want) {
		t.Fatalf("disable got %+v; want bob disabled with sessions %v revoked", resp, want)
	}
	evs := revokedEvents(t, env)
	if len(evs) != 2 || evs[1].Reason != "disabled" || evs[1].UserID != bob.ID || !sameSet(evs[1].SessionIDs, want) {
		t.Fatalf("session.revoked events: got %+v; want logout's and then one naming %v", evs, want)
	}
	if n := count(t, env, `SELECT count(*) FROM sessions WHERE user_id = $1 AND revoked_at IS NULL`, bob.ID); n != 0 {
		t.Fatalf("bob's live sessions: got %d; want 0", n)
	}
	for _, tok := range []string{tok1, tok2} {
		if _, err := env.Client(tok).Whoami(ctx); !errors.Is(err, api.ErrUnauthenticated) || !strings.Contains(err.Error(), "disabled") {
			t.Fatalf("whoami with a token of the disabled user: got %v; want unauthenticated saying the account is disabled", err)
		}
	}
	if _, err := anon.Login(ctx, api.LoginRequest{Email: bob.Email, Password: pw}); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("login of the disabled user: got %v; want forbidden", err)
	}
	if _, err := gateproto.GateUserToken(ctx, gw, gateproto.GateUserTokenRequest{UserID: bob.ID, Certificate: cert}); err == nil {
		t.Fatal("a delegated session for the disabled user was opened; want it refused")
	}
	before := tableDigest(t, env)
	if _, err := admin.AdminUserInvite(ctx, bob.Email); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("invite the disabled user: got %v; want conflict", err)
	}
	if _, err := admin.AdminUserDisable(ctx, bob.ID); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("disable again: got %v; want conflict", err)
	}
	if got := tableDigest(t, env); got != before {
		t.Fatalf("refused requests changed tables:\n%s\nwant\n%s", got, before)
	}

	if _, err := admin.AdminUserEnable(ctx, bob.Email); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client(tok1).Whoami(ctx); !errors.Is(err, api.ErrUnauthenticated) {
		t.Fatalf("an old token after enable: got %v; want it still refused", err)
	}
	if _, err := env.Client(env.Login(t, bob.Email, pw)).Whoami(ctx); err != nil {
		t.Fatalf("login after enable: %v", err)
	}
}

func TestUserAdminRefusals(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	_, opToken := env.AddUser(t, "op@example.test", api.RoleOperator)
	op := env.Client(opToken)
	before := tableDigest(t, env)
	tests := []struct {
		name string
		call func() error
		want error
		msg  string
	}{
		{"list as an operator", func() error { _, err := op.AdminUserList(ctx); return err }, api.ErrForbidden, "admin role"},
		{"add as an operator", func() error { _, err := op.AdminUserAdd(ctx, api.UserAddRequest{Email: "x@example.test"}); return err }, api.ErrForbidden, "admin role"},
		{"add without an email", func() error { _, err := admin.AdminUserAdd(ctx, api.UserAddRequest{}); return err }, api.ErrInvalidArgument, "not an email"},
		{"add a service role", func() error {
			_, err := admin.AdminUserAdd(ctx, api.UserAddRequest{Email: "gw@example.test", Role: api.RoleGateway})
			return err
		}, api.ErrInvalidArgument, "not one of user, operator, admin"},
		{"add with a two-line name", func() error {
			_, err := admin.AdminUserAdd(ctx, api.UserAddRequest{Email: "x@example.test", Name: "a\nb"})
			return err
		}, api.ErrInvalidArgument, "one line"},
		{"add an unknown field", func() error {
			return admin.Mutate(ctx, api.EndpointAdminUserAdd, map[string]string{"email": "x@example.test", "rol": "admin"}, nil)
		}, api.ErrInvalidArgument, "unknown field"},
		{"disable yourself", func() error { _, err := admin.AdminUserDisable(ctx, controldtest.AdminEmail); return err }, api.ErrInvalidArgument, "yourself"},
		{"disable nobody", func() error { _, err := admin.AdminUserDisable(ctx, ""); return err }, api.ErrInvalidArgument, "email or id"},
		{"enable an active user", func() error { _, err := admin.AdminUserEnable(ctx, "op@example.test"); return err }, api.ErrConflict, "not disabled"},
		{"invite an unknown user", func() error { _, err := admin.AdminUserInvite(ctx, "u-ghost"); return err }, api.ErrNotFound, "no user"},
		{"link without a subject", func() error {
			_, err := admin.AdminUserLink(ctx, api.UserLinkRequest{User: "op@example.test", Issuer: "https://idp.example.test"})
			return err
		}, api.ErrInvalidArgument, "subject"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("got %v; want %v saying %q", err, tt.want, tt.msg)
			}
		})
	}
	if got := tableDigest(t, env); got != before {
		t.Fatalf("refused requests changed tables:\n%s\nwant\n%s", got, before)
	}
}

// TestDisableAdminsRace: two admins disabling each other at once cannot
// both succeed; one active admin always remains.
func TestDisableAdminsRace(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	second, secondToken := env.AddUser(t, "admin2@example.test", api.RoleAdmin)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Go(func() { _, errs[0] = env.Client(env.AdminToken).AdminUserDisable(t.Context(), second.ID) })
	wg.Go(func() { _, errs[1] = env.Client(secondToken).AdminUserDisable(t.Context(), env.Admin.ID) })
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("got %v and %v; want exactly one to succeed", errs[0], errs[1])
	}
	if n := count(t, env, `SELECT count(*) FROM users WHERE role = 'admin' AND disabled_at IS NULL`); n != 1 {
		t.Fatalf("active admins: got %d; want 1", n)
	}
}

// TestDisableDuringLogins: logins racing a disable either fail or open a
// session the disable revokes and names; none is left live.
func TestDisableDuringLogins(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	bob, _ := env.AddUser(t, "bob@example.test", api.RoleUser)
	const n = 8
	var wg sync.WaitGroup
	logins := make([]*api.LoginResponse, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			logins[i], errs[i] = env.AnonClient().Login(t.Context(), api.LoginRequest{Email: bob.Email, Password: "another good password"})
		})
	}
	var disabled *api.UserDisableResponse
	var disableErr error
	wg.Go(func() { disabled, disableErr = env.Client(env.AdminToken).AdminUserDisable(t.Context(), bob.ID) })
	wg.Wait()
	if disableErr != nil {
		t.Fatal(disableErr)
	}
	for i := range n {
		switch {
		case errs[i] == nil && !slices.Contains(disabled.RevokedSessions, logins[i].SessionID):
			t.Errorf("login %d opened session %s, which the disable did not revoke (%v)", i, logins[i].SessionID, disabled.RevokedSessions)
		case errs[i] != nil && !errors.Is(errs[i], api.ErrForbidden) && !errors.Is(errs[i], api.ErrRateLimited):
			t.Errorf("login %d: got %v; want success or forbidden", i, errs[i])
		}
	}
	if live := count(t, env, `SELECT count(*) FROM sessions WHERE user_id = $1 AND revoked_at IS NULL`, bob.ID); live != 0 {
		t.Fatalf("live sessions of the disabled user: got %d; want 0", live)
	}
}
