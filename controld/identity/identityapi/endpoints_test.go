package identityapi_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/identity/identityapi"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("identityapi")

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const password = "another good password"

// served is identity's endpoints over a fresh database with an admin
// and a user who has a password.
type served struct {
	pool        *pgxpool.Pool
	run         *mutate.Runner
	defs        []endpoint.Def
	admin, user api.User
}

func serve(t *testing.T, limits identity.LoginLimits) *served {
	t.Helper()
	ctx := context.Background()
	pool, err := store.Open(ctx, testutil.Postgres(t, pgTemplate), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return now }
	svc, err := identity.New(identity.Config{SigningKey: key, Now: clock, Log: testutil.Logger(t),
		Settings: identity.Settings{BcryptCost: 4, LoginLimits: limits}})
	if err != nil {
		t.Fatal(err)
	}
	run := &mutate.Runner{Pool: pool, Now: clock}
	s := &served{pool: pool, run: run,
		defs: identityapi.Endpoints(identityapi.Deps{DB: pool, IDs: svc, Mut: run, Now: clock})}
	if s.admin, err = svc.CreateLocalUser(ctx, pool, identity.NewUser{Email: "admin@example.test", Name: "Admin",
		Role: api.RoleAdmin, Password: password}); err != nil {
		t.Fatal(err)
	}
	if s.user, err = svc.CreateLocalUser(ctx, pool, identity.NewUser{Email: "bob@example.test", Name: "Bob",
		Role: api.RoleUser, Password: password}); err != nil {
		t.Fatal(err)
	}
	return s
}

// login calls auth.login as a client at source with key as its
// Idempotency-Key, as the server serves it (endpoint.Custom).
func (s *served) login(t *testing.T, key, source string, req api.LoginRequest) (*api.LoginResponse, error) {
	t.Helper()
	r := &endpoint.Request{IdempotencyKey: key, Corr: ids.New("corr"), Log: testutil.Logger(t),
		SourceOf: func() string { return source }}
	out, err := endpointtest.Find(t, s.defs, api.EndpointAuthLogin).Serve(context.Background(), r, endpointtest.Body(req))
	if err != nil {
		return nil, err
	}
	var resp api.LoginResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("login reply %s: %v", out, err)
	}
	return &resp, nil
}

func (s *served) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// written counts the rows a login or a refusal may write, each table
// apart.
func (s *served) written(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"sessions", "audit_logs", "outbox_events", "idempotency_keys", "login_attempts"} {
		out[table] = s.count(t, `SELECT count(*) FROM `+table)
	}
	out["logged in"] = s.count(t, `SELECT count(*) FROM users WHERE last_login_at IS NOT NULL`)
	return out
}

// TestDisabledUserCannotLogIn: admin.user_disable revokes the user's
// sessions in its transaction; the user's next login, with the right
// password, is refused as disabled, opens no session, records no login
// and writes no event nor idempotency record; only its refusal is
// audited (in a write of its own).
func TestDisabledUserCannotLogIn(t *testing.T) {
	ctx := context.Background()
	s := serve(t, identity.LoginLimits{})
	first, err := s.login(t, ids.New("key"), "192.0.2.7", api.LoginRequest{Email: " Bob@example.test ", Password: password})
	if err != nil || first.User.ID != s.user.ID {
		t.Fatalf("login before the disable: %+v, %v", first, err)
	}
	admin := &endpoint.Request{Principal: &identity.Principal{UserID: s.admin.ID, Role: api.RoleAdmin}}
	dis, err := endpointtest.Mutate[api.UserDisableResponse](ctx, s.run, endpointtest.Find(t, s.defs, api.EndpointAdminUserDisable),
		admin, api.UserRef{User: s.user.Email})
	if err != nil || len(dis.RevokedSessions) != 1 || dis.RevokedSessions[0] != first.SessionID {
		t.Fatalf("disable: %+v, %v; want the session %s revoked", dis, err, first.SessionID)
	}
	if n := s.count(t, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND payload->'session_ids' ? $2`,
		api.EventSessionRevoked, first.SessionID); n != 1 {
		t.Fatalf("session.revoked events naming the session: %d; want 1", n)
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'admin.user_disable' AND target_id = $1`, s.user.ID); n != 1 {
		t.Fatalf("audited disables: %d; want 1", n)
	}

	before := s.written(t)
	_, err = s.login(t, ids.New("key"), "192.0.2.7", api.LoginRequest{Email: "bob@example.test", Password: password})
	if !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("a disabled user's login: got %v; want forbidden", err)
	}
	after := s.written(t)
	for table, n := range before {
		want := n
		switch table {
		case "audit_logs":
			want++ // the refusal
		case "login_attempts":
			continue // a refused login counts against the limits, whatever refused it
		}
		if after[table] != want {
			t.Errorf("%s: %d rows after the refused login; want %d", table, after[table], want)
		}
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'auth.login_refused' AND target_id = 'bob@example.test'
		AND actor_id = 'anonymous:bob@example.test' AND detail->>'code' = 'forbidden' AND detail->>'source' = '192.0.2.7'`); n != 1 {
		t.Errorf("audited refusals of the disabled user: %d; want 1", n)
	}
}

// TestLoginNeedsAnIdempotencyKey: a login without an Idempotency-Key is
// refused before anything else runs: no failure is counted against the
// account or the address and no refusal is audited.
func TestLoginNeedsAnIdempotencyKey(t *testing.T) {
	s := serve(t, identity.LoginLimits{})
	before := s.written(t)
	for _, pw := range []string{password, "a wrong password"} {
		_, err := s.login(t, "", "192.0.2.8", api.LoginRequest{Email: "bob@example.test", Password: pw})
		if !errors.Is(err, api.ErrInvalidArgument) {
			t.Fatalf("login without a key: got %v; want invalid_argument", err)
		}
	}
	if after := s.written(t); len(after) != len(before) || !equal(after, before) {
		t.Fatalf("rows after logins without a key: %v; want %v", after, before)
	}
}

// TestLockoutIsAudited: the failure that uses up an address's budget at
// an account is audited as a lockout of its own, apart from the refusal;
// the right password from that address is then refused too (and
// audited), while another address logs in.
func TestLockoutIsAudited(t *testing.T) {
	s := serve(t, identity.LoginLimits{Account: identity.Limit{MaxFailures: 2, Lockout: time.Minute}})
	for i := 1; i <= 2; i++ {
		if _, err := s.login(t, ids.New("key"), "192.0.2.9", api.LoginRequest{Email: "bob@example.test", Password: "a wrong password"}); !errors.Is(err, api.ErrUnauthenticated) {
			t.Fatalf("guess %d: got %v; want unauthenticated", i, err)
		}
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'auth.login_lockout' AND target_id = 'bob@example.test'
		AND detail->>'source' = '192.0.2.9' AND detail->>'scope' = 'client' AND (detail->>'locked_seconds')::int = 60`); n != 1 {
		t.Fatalf("audited lockouts: %d; want 1", n)
	}
	if _, err := s.login(t, ids.New("key"), "192.0.2.9", api.LoginRequest{Email: "bob@example.test", Password: password}); !errors.Is(err, api.ErrRateLimited) {
		t.Fatalf("the right password from the locked-out address: got %v; want rate_limited", err)
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'auth.login_refused' AND detail->>'source' = '192.0.2.9'`); n != 3 {
		t.Fatalf("audited refusals from the address: %d; want 3 (two guesses, one locked out)", n)
	}
	if n := s.count(t, `SELECT count(*) FROM sessions`); n != 0 {
		t.Fatalf("sessions after the lockout: %d; want none", n)
	}
	if got, err := s.login(t, ids.New("key"), "192.0.2.10", api.LoginRequest{Email: "bob@example.test", Password: password}); err != nil || got.User.ID != s.user.ID {
		t.Fatalf("the owner from another address: %+v, %v", got, err)
	}
}

// TestUserLinkRefusesABadIssuer: admin.user_link takes an http(s)
// issuer only, checked before its transaction: nothing is written.
func TestUserLinkRefusesABadIssuer(t *testing.T) {
	ctx := context.Background()
	s := serve(t, identity.LoginLimits{})
	link := endpointtest.Find(t, s.defs, api.EndpointAdminUserLink)
	admin := &endpoint.Request{Principal: &identity.Principal{UserID: s.admin.ID, Role: api.RoleAdmin}}
	before := s.written(t)
	for _, iss := range []string{"", "idp.example.com", "ftp://idp.example.com", "https://"} {
		_, err := endpointtest.Mutate[api.AdminUser](ctx, s.run, link, admin, api.UserLinkRequest{User: s.user.ID, Issuer: iss, Subject: "sub-1"})
		if !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("issuer %q: got %v; want invalid_argument", iss, err)
		}
	}
	if after := s.written(t); !equal(after, before) {
		t.Fatalf("rows after refused links: %v; want %v", after, before)
	}
	got, err := endpointtest.Mutate[api.AdminUser](ctx, s.run, link, admin, api.UserLinkRequest{User: s.user.ID,
		Issuer: "https://idp.example.com", Subject: "sub-1"})
	if err != nil || got.OIDCIssuer != "https://idp.example.com" || got.OIDCSubject != "sub-1" {
		t.Fatalf("link: %+v, %v", got, err)
	}
	if n := s.count(t, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND subject = $2`, api.EventUser, s.user.ID); n != 1 {
		t.Fatalf("user events of the link: %d; want 1", n)
	}
}

func equal(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
