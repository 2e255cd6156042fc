package controld_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestAuditListByRole: a project owner reads their project's audit rows,
// filtered, with a token shown as the actor of what it did; a member
// cannot; only admins read every stream; bad filters are refused.
func TestAuditListByRole(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	alice, owner := tokenOwner(t, env)
	tok, err := owner.TokenCreate(ctx, api.TokenCreateRequest{Name: "ci-run", Role: api.ProjectMember, TTL: "1d"})
	if err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Minute)
	a, err := env.Client(tok.Secret, api.WithProject("")).AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := owner.AuditList(ctx, api.AuditListRequest{Action: "alloc.*", Since: &since})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Records) != 1 {
		t.Fatalf("alice's alloc.* rows: got %+v; want the one create", got.Records)
	}
	r := got.Records[0]
	if r.Action != api.EndpointAllocCreate || r.TargetID != a.ID || r.Actor != tok.Token.ID || r.ActorName != "token ci-run" {
		t.Errorf("row: got %+v; want alloc.create of %s by token ci-run", r, a.ID)
	}
	if byActor, err := owner.AuditList(ctx, api.AuditListRequest{Actor: alice.Email}); err != nil ||
		len(byActor.Records) != 2 || byActor.Records[0].Action != api.EndpointProjectCreate {
		t.Errorf("alice's own rows: got %+v, %v; want project.create and token.create", byActor, err)
	}
	if byTarget, err := owner.AuditList(ctx, api.AuditListRequest{Target: "allocation:" + a.ID}); err != nil || len(byTarget.Records) != 1 {
		t.Errorf("rows of target allocation:%s: got %+v, %v; want 1", a.ID, byTarget, err)
	}

	bob, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	if _, err := owner.ProjectAddMember(ctx, api.AddMemberRequest{Project: "alpha", Email: bob.Email, Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}
	bobc := env.Client(bobToken, api.WithProject("alpha"))
	if _, err := bobc.AuditList(ctx, api.AuditListRequest{}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("a member's audit list: got %v; want forbidden", err)
	}
	if _, err := owner.AuditList(ctx, api.AuditListRequest{AllProjects: true}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("an owner's audit list of every project: got %v; want forbidden", err)
	}
	if _, err := env.Client(tok.Secret, api.WithProject("")).AuditList(ctx, api.AuditListRequest{}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("a token's audit list: got %v; want forbidden", err)
	}
	all, err := env.Client(env.AdminToken).AuditList(ctx, api.AuditListRequest{AllProjects: true})
	if err != nil {
		t.Fatal(err)
	}
	streams := map[string]bool{}
	for _, r := range all.Records {
		streams[r.Stream] = true
	}
	if !streams[""] || !streams[r.Project] {
		t.Errorf("admin's streams: got %v; want the platform's and alpha's", streams)
	}
	for _, bad := range []api.AuditListRequest{{Limit: -1}, {Limit: api.AuditPageMax + 1}, {After: -1},
		{Newest: true, After: 3}, {Actor: strings.Repeat("x", 201)}} {
		if _, err := owner.AuditList(ctx, bad); !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("audit list %+v: got %v; want invalid argument", bad, err)
		}
	}
	// Pages: After the last row of a page is the next page.
	first, err := env.Client(env.AdminToken).AuditList(ctx, api.AuditListRequest{AllProjects: true, Limit: 2})
	if err != nil || len(first.Records) != 2 || !first.More {
		t.Fatalf("first page: got %+v, %v; want 2 rows and more", first, err)
	}
	next, err := env.Client(env.AdminToken).AuditList(ctx, api.AuditListRequest{AllProjects: true, Limit: 2, After: first.Records[1].ID})
	if err != nil || len(next.Records) == 0 || next.Records[0].ID <= first.Records[1].ID {
		t.Errorf("next page: got %+v, %v; want rows after %d", next, err, first.Records[1].ID)
	}
}

// TestAuditVerifyNamesTheEditedRow: ops.audit_verify passes on the trail
// mutations wrote, and after a row is edited in the database (as a
// superuser with the triggers off) fails naming it. Admins only.
func TestAuditVerifyNamesTheEditedRow(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	_, owner := tokenOwner(t, env)
	admin := env.Client(env.AdminToken)
	if _, err := owner.AuditVerify(ctx); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("verify by a user: got %v; want forbidden", err)
	}
	v, err := admin.AuditVerify(ctx)
	if err != nil || !v.OK || v.Rows == 0 {
		t.Fatalf("verify: got %+v, %v; want ok", v, err)
	}
	var id int64
	// The test database's owner, not controld's app role (which may not).
	conn, err := pgx.Connect(ctx, env.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `UPDATE audit_logs SET actor_id = 'u-mallory'
			WHERE id = (SELECT min(id) FROM audit_logs WHERE action = 'project.create') RETURNING id`).Scan(&id)
	})
	if err != nil {
		t.Fatal(err)
	}
	v, err = admin.AuditVerify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.OK || len(v.Problems) == 0 || v.Problems[0].ID != id {
		t.Fatalf("verify after the edit: got %+v; want a problem naming row %d", v, id)
	}
}
