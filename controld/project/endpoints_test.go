package project_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// served is a database with project's endpoints over it.
type served struct {
	pool *pgxpool.Pool
	ids  *identity.Service
	endpointtest.Harness
}

func serve(t *testing.T) *served {
	t.Helper()
	pool := newPool(t)
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := identity.New(identity.Config{SigningKey: key, Settings: identity.Settings{BcryptCost: 4}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return now }
	return &served{pool: pool, ids: ids, Harness: endpointtest.Serve(pool, clock,
		project.Endpoints(project.Deps{DB: pool, Tokens: ids, Now: clock}))}
}

func as(user, role string) *endpoint.Request {
	return endpointtest.As(user, role, "")
}

func (s *served) create(t *testing.T, name, owner string) string {
	t.Helper()
	p, err := endpointtest.Mutate[api.Project](context.Background(), s.Run, s.Find(t, api.EndpointProjectCreate),
		as(owner, api.RoleUser), api.ProjectCreateRequest{Name: name})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return p.ID
}

// TestRefOrder: the project a request acts in is the one its body names,
// else its header's, else the caller's default; a gateway has no
// default, and a default the caller left is not_found with a hint.
func TestRefOrder(t *testing.T) {
	s := serve(t)
	ctx := context.Background()
	alice := newUser(t, s.pool, "alice@example.test")
	bob := newUser(t, s.pool, "bob@example.test")
	home := s.create(t, "home", alice)
	bobs := s.create(t, "bobs", bob)
	for _, tc := range []struct {
		name, named, header string
		r                   *endpoint.Request
		want                string
	}{
		{"named wins", "other", "hdr", as(alice, api.RoleUser), "other"},
		{"header next", "", "hdr", as(alice, api.RoleUser), "hdr"},
		{"default last", "", "", as(alice, api.RoleUser), home},
		{"gateway has none", "", "", as("gw", api.RoleGateway), ""},
		{"no principal", "", "", &endpoint.Request{}, ""},
	} {
		tc.r.Project = tc.header
		got, err := project.Ref(ctx, s.pool, tc.r, tc.named)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	// A default that is no longer one of the caller's projects.
	if err := project.SetDefault(ctx, s.pool, alice, bobs, now); err != nil {
		t.Fatal(err)
	}
	_, err := project.Ref(ctx, s.pool, as(alice, api.RoleUser), "")
	endpointtest.WantCode(t, "default left", err, api.CodeNotFound)
}

// TestUseEndpoint: project.use refuses no name (invalid_argument) and a
// project the caller is not in (not_found) without changing the default
// or writing an audit row; a project they are in becomes their default,
// with one audit row and an event to them alone.
func TestUseEndpoint(t *testing.T) {
	s := serve(t)
	ctx := context.Background()
	alice := newUser(t, s.pool, "alice@example.test")
	bob := newUser(t, s.pool, "bob@example.test")
	first := s.create(t, "first", alice)
	second := s.create(t, "second", alice)
	s.create(t, "bobs", bob)
	use := s.Find(t, api.EndpointProjectUse)
	audits := func() int {
		return storetest.Count(t, s.pool, `SELECT count(*) FROM audit_logs WHERE action = $1`, api.EndpointProjectUse)
	}
	for _, tc := range []struct {
		name, project string
		want          api.Code
	}{{"no name", "  ", api.CodeInvalidArgument}, {"not a member", "bobs", api.CodeNotFound}} {
		_, err := endpointtest.Mutate[api.Project](ctx, s.Run, use, as(alice, api.RoleUser), api.ProjectUseRequest{Project: tc.project})
		endpointtest.WantCode(t, tc.name, err, tc.want)
	}
	if n := audits(); n != 0 {
		t.Errorf("audit rows after refusals: got %d; want 0", n)
	}
	if def, _, _ := project.DefaultOf(ctx, s.pool, alice); def.ID != first {
		t.Errorf("default after refusals: got %s; want %s", def.ID, first)
	}
	// Admins too use only projects they are in: the role is not asked.
	_, err := endpointtest.Mutate[api.Project](ctx, s.Run, use, as(alice, api.RoleAdmin), api.ProjectUseRequest{Project: "bobs"})
	endpointtest.WantCode(t, "admin, not a member", err, api.CodeNotFound)

	p, err := endpointtest.Mutate[api.Project](ctx, s.Run, use, as(alice, api.RoleUser), api.ProjectUseRequest{Project: " second "})
	if err != nil || p.ID != second {
		t.Fatalf("use second: got %+v, %v; want %s", p, err, second)
	}
	if def, _, _ := project.DefaultOf(ctx, s.pool, alice); def.ID != second {
		t.Errorf("default: got %s; want %s", def.ID, second)
	}
	if n := audits(); n != 1 {
		t.Errorf("audit rows: got %d; want 1", n)
	}
	if n := storetest.Count(t, s.pool, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND users = ARRAY[$2]::text[]`,
		api.EventDefaultProject, alice); n != 1 {
		t.Errorf("default-project events to alice alone: got %d; want 1", n)
	}
}

// TestAddMemberEndpoint: only owners (and admins) add members, the
// project coming from the header when the body names none; an unknown
// email is not_found; neither refusal writes a member or an audit row.
// An addition tells every member.
func TestAddMemberEndpoint(t *testing.T) {
	s := serve(t)
	ctx := context.Background()
	owner := newUser(t, s.pool, "owner@example.test")
	member := newUser(t, s.pool, "member@example.test")
	newcomer := newUser(t, s.pool, "new@example.test")
	p := s.create(t, "proj", owner)
	if err := project.SetMember(ctx, s.pool, p, member, api.ProjectMember, now); err != nil {
		t.Fatal(err)
	}
	add := s.Find(t, api.EndpointProjectAddMem)
	inHeader := func(user string) *endpoint.Request { r := as(user, api.RoleUser); r.Project = "proj"; return r }
	_, err := endpointtest.Mutate[api.MembersResponse](ctx, s.Run, add, inHeader(member),
		api.AddMemberRequest{Email: "new@example.test", Role: api.ProjectMember})
	endpointtest.WantCode(t, "a member adds", err, api.CodeForbidden)
	_, err = endpointtest.Mutate[api.MembersResponse](ctx, s.Run, add, inHeader(owner),
		api.AddMemberRequest{Email: "nobody@example.test", Role: api.ProjectMember})
	endpointtest.WantCode(t, "unknown email", err, api.CodeNotFound)
	if n := storetest.Count(t, s.pool, `SELECT count(*) FROM audit_logs WHERE action = 'project.set_member'`); n != 0 {
		t.Errorf("audit rows after refusals: got %d; want 0", n)
	}
	if role, _ := project.RoleOf(ctx, s.pool, p, newcomer); role != "" {
		t.Errorf("newcomer's role after refusals: got %q; want none", role)
	}

	resp, err := endpointtest.Mutate[api.MembersResponse](ctx, s.Run, add, inHeader(owner),
		api.AddMemberRequest{Email: "new@example.test", Role: api.ProjectViewer})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Project.ID != p || len(resp.Members) != 3 {
		t.Errorf("answer: got project %s with %d members; want %s with 3", resp.Project.ID, len(resp.Members), p)
	}
	if role, _ := project.RoleOf(ctx, s.pool, p, newcomer); role != api.ProjectViewer {
		t.Errorf("newcomer's role: got %q; want viewer", role)
	}
	if n := storetest.Count(t, s.pool, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND users @> ARRAY[$2, $3, $4]::text[]`,
		api.EventProject, owner, member, newcomer); n != 1 {
		t.Errorf("events telling all three members: got %d; want 1", n)
	}
}

// TestMembersHidesDeadTokens: project.members lists a project's live
// machine tokens and leaves out a revoked one, which stays a member.
func TestMembersHidesDeadTokens(t *testing.T) {
	s := serve(t)
	ctx := context.Background()
	owner := newUser(t, s.pool, "owner@example.test")
	p := s.create(t, "proj", owner)
	tokens := map[string]string{}
	for _, name := range []string{"live", "revoked"} {
		if err := inTx(t, s.pool, func(tx pgx.Tx) error {
			tok, _, err := s.ids.CreateMachineToken(ctx, tx, identity.NewMachineToken{Name: name, ProjectID: p,
				Role: api.ProjectMember, TTL: 24 * time.Hour, CreatedBy: owner})
			if err != nil {
				return err
			}
			tokens[name] = tok.ID
			return project.SetMember(ctx, tx, p, tok.ID, api.ProjectMember, now)
		}); err != nil {
			t.Fatalf("token %s: %v", name, err)
		}
	}
	if _, err := s.ids.RevokeMachineToken(ctx, s.pool, tokens["revoked"], owner, now); err != nil {
		t.Fatal(err)
	}
	resp, err := endpointtest.Read[api.MembersResponse](ctx, s.Find(t, api.EndpointProjectMembers),
		as(owner, api.RoleUser), api.ProjectRef{Project: "proj"})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range resp.Members {
		listed[m.UserID] = true
	}
	if !listed[owner] || !listed[tokens["live"]] || listed[tokens["revoked"]] || len(resp.Members) != 2 {
		t.Errorf("members: got %+v; want the owner and the live token", resp.Members)
	}
	if role, _ := project.RoleOf(ctx, s.pool, p, tokens["revoked"]); role == "" {
		t.Error("the revoked token is no longer a member; want it kept (its actions keep their actor)")
	}
}
