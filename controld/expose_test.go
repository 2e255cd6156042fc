package controld_test

import (
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestExposeAccess: members expose and end their ports, viewers list and
// expose nothing, strangers learn nothing, a member token exposes (a
// pipeline's model server), a viewer token does not; each refusal writes
// no exposure.
func TestExposeAccess(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	a := activeAlloc(t, env, admin)
	_, memberToken := env.AddUser(t, "member@example.test", api.RoleUser)
	_, viewerToken := env.AddUser(t, "viewer@example.test", api.RoleUser)
	_, strangerToken := env.AddUser(t, "stranger@example.test", api.RoleUser)
	for _, m := range []struct{ email, role string }{{"member@example.test", api.ProjectMember}, {"viewer@example.test", api.ProjectViewer}} {
		if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Email: m.email, Role: m.role}); err != nil {
			t.Fatal(err)
		}
	}
	member, viewer, stranger := env.Client(memberToken), env.Client(viewerToken), env.Client(strangerToken)
	for _, c := range []*api.Client{member, viewer} {
		if _, err := c.ProjectUse(ctx, controldtest.ProjectName); err != nil {
			t.Fatal(err)
		}
	}

	e, err := member.ExposeCreate(ctx, api.ExposeCreateRequest{Allocation: a.ID, Port: 8888, Share: api.ShareProject, TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Host != api.ExposureHost(a.ID, 8888) || e.Share != api.ShareProject {
		t.Fatalf("got %+v; want port 8888 of %s shared with the project", e, a.ID)
	}
	list, err := viewer.ExposeList(ctx, api.ExposeListRequest{})
	if err != nil || len(list.Exposures) != 1 || list.Exposures[0].ID != e.ID {
		t.Fatalf("viewer's list: got %+v, %v; want [%s]", list, err, e.ID)
	}

	before := count(t, env, `SELECT count(*) FROM exposures`)
	refusals := []struct {
		name string
		c    *api.Client
		req  api.ExposeCreateRequest
		want error
	}{
		{"a viewer", viewer, api.ExposeCreateRequest{Allocation: a.ID, Port: 8889}, api.ErrForbidden},
		{"another project's allocation", stranger, api.ExposeCreateRequest{Allocation: a.ID, Port: 8889}, api.ErrNotFound},
		{"port 0", member, api.ExposeCreateRequest{Allocation: a.ID, Port: 0}, api.ErrInvalidArgument},
		{"port 70000", member, api.ExposeCreateRequest{Allocation: a.ID, Port: 70000}, api.ErrInvalidArgument},
		{"ttl 0", member, api.ExposeCreateRequest{Allocation: a.ID, Port: 8889, TTL: "0"}, api.ErrInvalidArgument},
		{"ttl over the maximum", member, api.ExposeCreateRequest{Allocation: a.ID, Port: 8889, TTL: "31d"}, api.ErrInvalidArgument},
		{"bad name", member, api.ExposeCreateRequest{Allocation: a.ID, Port: 8889, Name: "Not A Name"}, api.ErrInvalidArgument},
		{"no allocation", member, api.ExposeCreateRequest{Port: 8889}, api.ErrInvalidArgument},
	}
	for _, r := range refusals {
		if _, err := r.c.ExposeCreate(ctx, r.req); !errors.Is(err, r.want) {
			t.Errorf("%s: got %v; want %v", r.name, err, r.want)
		}
	}
	if _, err := stranger.ExposeRemove(ctx, api.ExposeRemoveRequest{Exposure: e.ID}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("a stranger's rm: got %v; want not found", err)
	}
	if _, err := viewer.ExposeRemove(ctx, api.ExposeRemoveRequest{Exposure: e.ID}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("a viewer's rm: got %v; want forbidden", err)
	}
	if got := count(t, env, `SELECT count(*) FROM exposures`); got != before {
		t.Fatalf("exposures after refusals: got %d; want %d", got, before)
	}
	if got := count(t, env, `SELECT count(*) FROM exposures WHERE removed_at IS NOT NULL`); got != 0 {
		t.Fatalf("removed exposures after refused removals: got %d; want 0", got)
	}

	// Tokens: a member token exposes and ends; a viewer token lists only.
	mt, err := admin.TokenCreate(ctx, api.TokenCreateRequest{Name: "ci-run", Role: api.ProjectMember, TTL: "1d"})
	if err != nil {
		t.Fatal(err)
	}
	vt, err := admin.TokenCreate(ctx, api.TokenCreateRequest{Name: "ci-read", Role: api.ProjectViewer, TTL: "1d"})
	if err != nil {
		t.Fatal(err)
	}
	byToken, err := tokenClient(t, env, mt.Secret).ExposeCreate(ctx, api.ExposeCreateRequest{Allocation: a.ID, Port: 9000, Share: api.SharePublic, TTL: "10m"})
	if err != nil {
		t.Fatalf("a member token's expose: %v", err)
	}
	vc := tokenClient(t, env, vt.Secret)
	if _, err := vc.ExposeCreate(ctx, api.ExposeCreateRequest{Allocation: a.ID, Port: 9001}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("a viewer token's expose: got %v; want forbidden", err)
	}
	if l, err := vc.ExposeList(ctx, api.ExposeListRequest{Allocation: a.ID}); err != nil || len(l.Exposures) != 2 {
		t.Errorf("a viewer token's list: got %+v, %v; want 2 exposures", l, err)
	}
	if _, err := member.ExposeRemove(ctx, api.ExposeRemoveRequest{Exposure: byToken.ID}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("a member ending another's exposure: got %v; want forbidden", err)
	}
	if _, err := admin.ExposeRemove(ctx, api.ExposeRemoveRequest{Exposure: byToken.ID}); err != nil {
		t.Errorf("a project owner ending any exposure: %v", err)
	}
	if _, err := member.ExposeRemove(ctx, api.ExposeRemoveRequest{Exposure: e.ID}); err != nil {
		t.Errorf("its creator ending an exposure: %v", err)
	}
}
