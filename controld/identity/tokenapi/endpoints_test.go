package tokenapi_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/identity/tokenapi"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("tokenapi")

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// errDelegated stands for the server's refusal of a delegated session.
var errDelegated = api.Errorf(api.CodeForbidden, "delegated")

// served is two projects, "one" of owner's (with member as a member) and
// "two" of other's, with tokens' endpoints over them.
type served struct {
	pool                 *pgxpool.Pool
	owner, member, other string
	one, two             string
	endpointtest.Harness
}

func serve(t *testing.T) *served {
	t.Helper()
	pool := storetest.Open(t, pgTemplate, 4)
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return now }
	svc, err := identity.New(identity.Config{SigningKey: key, Settings: identity.Settings{BcryptCost: 4}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	s := &served{pool: pool, owner: ids.New(ids.User), member: ids.New(ids.User), other: ids.New(ids.User),
		one: ids.New(ids.Project), two: ids.New(ids.Project), Harness: endpointtest.Serve(pool, clock,
			tokenapi.Endpoints(tokenapi.Deps{DB: pool, IDs: svc, Delegated: errDelegated, Now: clock}))}
	storetest.Users(t, pool, now, s.owner, s.member, s.other)
	storetest.OwnedProject(t, pool, s.one, "one", s.owner, now)
	storetest.Member(t, pool, s.one, s.member, api.ProjectMember, now)
	storetest.OwnedProject(t, pool, s.two, "two", s.other, now)
	return s
}

func as(user, project string) *endpoint.Request {
	return endpointtest.User(user, project)
}

func (s *served) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return storetest.Count(t, s.pool, sql, args...)
}

func (s *served) written(t *testing.T) int {
	return s.count(t, `SELECT (SELECT count(*) FROM project_members) + (SELECT count(*) FROM users) +
		(SELECT count(*) FROM audit_logs) + (SELECT count(*) FROM outbox_events)`)
}

// TestCreateTokenEndpoint: a project's owner creates a member token, which
// joins the project with its role and whose secret is in the reply only;
// a delegated session, a member of the project, a role beyond member and
// a bad name are refused with nothing written; listing is the owner's.
func TestCreateTokenEndpoint(t *testing.T) {
	ctx := context.Background()
	s := serve(t)
	create, list := s.Find(t, api.EndpointTokenCreate), s.Find(t, api.EndpointTokenList)
	req := api.TokenCreateRequest{Name: " ci ", Role: api.ProjectMember, TTL: "720h"}
	got, err := endpointtest.Mutate[api.TokenCreateResponse](ctx, s.Run, create, as(s.owner, "one"), req)
	if err != nil || got.Secret == "" || got.Token.Name != "ci" || got.Token.ProjectID != s.one || !got.Token.ExpiresAt.Equal(now.Add(720*time.Hour)) {
		t.Fatalf("owner's create: %+v, %v", got, err)
	}
	if n := s.count(t, `SELECT count(*) FROM project_members WHERE project_id = $1 AND user_id = $2 AND role = $3`,
		s.one, got.Token.ID, api.ProjectMember); n != 1 {
		t.Fatalf("the token is a member of its project %d times; want once", n)
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs a, outbox_events e WHERE strpos(a.detail::text, $1) > 0
		OR strpos(e.payload::text, $1) > 0`, got.Secret); n != 0 {
		t.Fatal("the token's secret is in the audit row or the event")
	}

	before := s.written(t)
	req.Name = "ci-2" // a name still free: each refusal below is its rule's
	delegated := as(s.owner, "one")
	delegated.Principal.Delegated = true
	if _, err := endpointtest.Mutate[api.TokenCreateResponse](ctx, s.Run, create, delegated, req); !errors.Is(err, errDelegated) {
		t.Errorf("delegated session's create: err = %v; want the server's delegated refusal", err)
	}
	for name, tc := range map[string]struct {
		r    *endpoint.Request
		req  api.TokenCreateRequest
		want api.Code
	}{
		"member":     {as(s.member, "one"), req, api.CodeForbidden},
		"outsider":   {as(s.other, "one"), req, api.CodeNotFound},
		"owner role": {as(s.owner, "one"), api.TokenCreateRequest{Name: "x", Role: api.ProjectOwner, TTL: "1h"}, api.CodeInvalidArgument},
		"bad name":   {as(s.owner, "one"), api.TokenCreateRequest{Name: "No Spaces", Role: api.ProjectViewer, TTL: "1h"}, api.CodeInvalidArgument},
	} {
		if _, err := endpointtest.Mutate[api.TokenCreateResponse](ctx, s.Run, create, tc.r, tc.req); api.CodeOf(err) != tc.want {
			t.Errorf("%s: err = %v; want %s", name, err, tc.want)
		}
	}
	if after := s.written(t); after != before {
		t.Fatalf("rows after the refusals: %d; want %d", after, before)
	}
	l, err := endpointtest.Read[api.TokenListResponse](ctx, list, as(s.owner, "one"), api.TokenListRequest{})
	if err != nil || len(l.Tokens) != 1 || l.Tokens[0].ID != got.Token.ID {
		t.Fatalf("owner's list: %+v, %v", l, err)
	}
	if _, err := endpointtest.Read[api.TokenListResponse](ctx, list, as(s.member, "one"), api.TokenListRequest{}); api.CodeOf(err) != api.CodeForbidden {
		t.Fatalf("member's list: err = %v; want forbidden", err)
	}
}

// TestRevokeTokenEndpoint: a token of a project the caller does not own is
// not found by id (nothing said of its project) and forbidden to a
// member; its owner revokes it by name, and the revocation tells the
// token's creator and the token itself.
func TestRevokeTokenEndpoint(t *testing.T) {
	ctx := context.Background()
	s := serve(t)
	create, revoke := s.Find(t, api.EndpointTokenCreate), s.Find(t, api.EndpointTokenRevoke)
	tok, err := endpointtest.Mutate[api.TokenCreateResponse](ctx, s.Run, create, as(s.owner, "one"),
		api.TokenCreateRequest{Name: "ci", Role: api.ProjectViewer, TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	id := tok.Token.ID
	if _, err := endpointtest.Mutate[api.Token](ctx, s.Run, revoke, as(s.other, "two"), api.TokenRevokeRequest{Token: id}); api.CodeOf(err) != api.CodeNotFound ||
		err.Error() != api.Errorf(api.CodeNotFound, "token %q not found", id).Error() {
		t.Errorf("outsider's revoke by id: err = %v; want token not found", err)
	}
	if _, err := endpointtest.Mutate[api.Token](ctx, s.Run, revoke, as(s.member, "one"), api.TokenRevokeRequest{Token: "ci"}); api.CodeOf(err) != api.CodeForbidden {
		t.Errorf("member's revoke: err = %v; want forbidden", err)
	}
	if _, err := endpointtest.Mutate[api.Token](ctx, s.Run, revoke, as(s.owner, "one"), api.TokenRevokeRequest{Token: " "}); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Errorf("revoke of no token: err = %v; want invalid_argument", err)
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs WHERE action = $1`, api.EndpointTokenRevoke); n != 0 {
		t.Fatalf("%d revocations audited after the refusals; want 0", n)
	}
	got, err := endpointtest.Mutate[api.Token](ctx, s.Run, revoke, as(s.owner, "one"), api.TokenRevokeRequest{Token: "ci"})
	if err != nil || got.ID != id || got.RevokedAt == nil || !got.RevokedAt.Equal(now) {
		t.Fatalf("owner's revoke by name: %+v, %v; want %s revoked at %s", got, err, id, now)
	}
	if n := s.count(t, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND users @> ARRAY[$2, $3]::text[]`,
		api.EventSessionRevoked, s.owner, id); n != 1 {
		t.Fatalf("%d session.revoked events to the creator and the token; want 1", n)
	}
}
