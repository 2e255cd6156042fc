package project_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestCreateOwnerAndDefault: a project is created with its creator as
// owner, and becomes their default project only when they have none.
func TestCreateOwnerAndDefault(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	owner := newUser(t, pool, "owner@example.test")
	var first, second string
	for _, name := range []string{"alpha", "beta"} {
		if err := inTx(t, pool, func(tx pgx.Tx) error {
			p, err := project.Create(ctx, tx, name, owner, now)
			if name == "alpha" {
				first = p.ID
			} else {
				second = p.ID
			}
			return err
		}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	for _, id := range []string{first, second} {
		if role, err := project.RoleOf(ctx, pool, id, owner); err != nil || role != api.ProjectOwner {
			t.Errorf("creator's role in %s: got %q, %v; want owner", id, role, err)
		}
	}
	def, ok, err := project.DefaultOf(ctx, pool, owner)
	if err != nil || !ok || def.ID != first {
		t.Errorf("default project: got %s (ok %v, %v); want the first one, %s", def.ID, ok, err, first)
	}
}

// TestCreateRefusals: a bad name is invalid_argument and a taken one a
// conflict; neither leaves a project, a member or a default behind.
func TestCreateRefusals(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	owner := newUser(t, pool, "owner@example.test")
	other := newUser(t, pool, "other@example.test")
	if err := inTx(t, pool, func(tx pgx.Tx) error { _, err := project.Create(ctx, tx, "taken", owner, now); return err }); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, project string
		want          api.Code
	}{
		{"too short", "ab", api.CodeInvalidArgument},
		{"upper case", "Alpha", api.CodeInvalidArgument},
		{"starts with a digit", "1abc", api.CodeInvalidArgument},
		{"taken", "taken", api.CodeConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := inTx(t, pool, func(tx pgx.Tx) error { _, err := project.Create(ctx, tx, tc.project, other, now); return err })
			endpointtest.WantCode(t, "create "+tc.project, err, tc.want)
			if n := storetest.Count(t, pool, `SELECT count(*) FROM projects`); n != 1 {
				t.Errorf("projects after a refused create: got %d; want 1", n)
			}
			if n := storetest.Count(t, pool, `SELECT count(*) FROM project_members WHERE user_id = $1`, other); n != 0 {
				t.Errorf("memberships of the refused creator: got %d; want 0", n)
			}
			if n := storetest.Count(t, pool, `SELECT count(*) FROM default_projects WHERE user_id = $1`, other); n != 0 {
				t.Errorf("default project of the refused creator: got %d rows; want 0", n)
			}
		})
	}
}

// TestAuthorizeByRole: each project role reaches its level and no
// further (forbidden), platform operators read every project and admins
// do everything, and a non-member learns only "not found".
func TestAuthorizeByRole(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	owner := newUser(t, pool, "owner@example.test")
	var p string
	if err := inTx(t, pool, func(tx pgx.Tx) error {
		pr, err := project.Create(ctx, tx, "proj", owner, now)
		p = pr.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	users := map[string]string{"owner": owner}
	for _, role := range []string{api.ProjectMember, api.ProjectViewer} {
		users[role] = newUser(t, pool, role+"@example.test")
		if err := project.SetMember(ctx, pool, p, users[role], role, now); err != nil {
			t.Fatal(err)
		}
	}
	users["stranger"] = newUser(t, pool, "stranger@example.test")
	users["operator"] = newUser(t, pool, "operator@example.test")
	users["admin"] = newUser(t, pool, "admin@example.test")
	// The stranger belongs to some project, so "not found" is not the
	// "no project yet" case.
	if err := inTx(t, pool, func(tx pgx.Tx) error {
		_, err := project.Create(ctx, tx, "elsewhere", users["stranger"], now)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	platform := map[string]string{"operator": api.RoleOperator, "admin": api.RoleAdmin}
	ok := api.Code("")
	for _, tc := range []struct {
		who                string
		read, write, admin api.Code
	}{
		{"owner", ok, ok, ok},
		{api.ProjectMember, ok, ok, api.CodeForbidden},
		{api.ProjectViewer, ok, api.CodeForbidden, api.CodeForbidden},
		{"stranger", api.CodeNotFound, api.CodeNotFound, api.CodeNotFound},
		{"operator", ok, api.CodeForbidden, api.CodeForbidden},
		{"admin", ok, ok, ok},
	} {
		role := platform[tc.who]
		if role == "" {
			role = api.RoleUser
		}
		for _, lv := range []struct {
			access project.Access
			want   api.Code
		}{{project.AccessRead, tc.read}, {project.AccessWrite, tc.write}, {project.AccessAdmin, tc.admin}} {
			// By name and by id alike.
			for _, ref := range []string{"proj", p} {
				got, err := project.Authorize(ctx, pool, ref, users[tc.who], role, lv.access)
				switch {
				case lv.want == ok && err != nil:
					t.Errorf("%s, access %d on %s: got %v; want allowed", tc.who, lv.access, ref, err)
				case lv.want == ok && got.ID != p:
					t.Errorf("%s, access %d on %s: got project %q; want %s", tc.who, lv.access, ref, got.ID, p)
				case lv.want != ok:
					endpointtest.WantCode(t, tc.who+" on "+ref, err, lv.want)
				}
			}
		}
	}
	_, err := project.Authorize(ctx, pool, "", owner, api.RoleUser, project.AccessRead)
	endpointtest.WantCode(t, "empty reference", err, api.CodeInvalidArgument)
	_, err = project.Authorize(ctx, pool, "nope", owner, api.RoleUser, project.AccessRead)
	endpointtest.WantCode(t, "unknown project", err, api.CodeNotFound)
}

// TestSetMemberKeepsAnOwner: the last owner cannot step down (conflict,
// nothing changed), a second owner lets them; an unknown role is
// invalid_argument; a member's first project becomes their default.
func TestSetMemberKeepsAnOwner(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	owner := newUser(t, pool, "owner@example.test")
	second := newUser(t, pool, "second@example.test")
	var p string
	if err := inTx(t, pool, func(tx pgx.Tx) error {
		pr, err := project.Create(ctx, tx, "proj", owner, now)
		p = pr.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	err := inTx(t, pool, func(tx pgx.Tx) error { return project.SetMember(ctx, tx, p, owner, api.ProjectMember, now) })
	endpointtest.WantCode(t, "last owner steps down", err, api.CodeConflict)
	if role, _ := project.RoleOf(ctx, pool, p, owner); role != api.ProjectOwner {
		t.Errorf("last owner's role after a refused demotion: got %q; want owner", role)
	}
	err = inTx(t, pool, func(tx pgx.Tx) error { return project.SetMember(ctx, tx, p, second, "boss", now) })
	endpointtest.WantCode(t, "unknown role", err, api.CodeInvalidArgument)
	if n := storetest.Count(t, pool, `SELECT count(*) FROM project_members WHERE user_id = $1`, second); n != 0 {
		t.Errorf("memberships after an unknown role: got %d; want 0", n)
	}
	if err := project.SetMember(ctx, pool, p, second, api.ProjectOwner, now); err != nil {
		t.Fatal(err)
	}
	if def, ok, _ := project.DefaultOf(ctx, pool, second); !ok || def.ID != p {
		t.Errorf("new member's default project: got %q (ok %v); want %s", def.ID, ok, p)
	}
	if err := project.SetMember(ctx, pool, p, owner, api.ProjectViewer, now); err != nil {
		t.Fatalf("owner steps down with another owner: %v", err)
	}
	if role, _ := project.RoleOf(ctx, pool, p, owner); role != api.ProjectViewer {
		t.Errorf("former owner's role: got %q; want viewer", role)
	}
	err = inTx(t, pool, func(tx pgx.Tx) error { return project.SetMember(ctx, tx, p, second, api.ProjectViewer, now) })
	endpointtest.WantCode(t, "new last owner steps down", err, api.CodeConflict)
}
