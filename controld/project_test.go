package controld_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestProjectMembership(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := context.Background()
	admin := env.Client(env.AdminToken)
	bob, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	_, carolToken := env.AddUser(t, "carol@example.test", api.RoleUser)
	bobC := env.Client(bobToken, api.WithProject(""))
	carolC := env.Client(carolToken, api.WithProject(""))

	p, err := bobC.ProjectCreate(ctx, api.ProjectCreateRequest{Name: "ml-team"})
	if err != nil || p.Role != api.ProjectOwner {
		t.Fatalf("create: %v %+v", err, p)
	}
	if _, err := bobC.ProjectCreate(ctx, api.ProjectCreateRequest{Name: "ml-team"}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("duplicate name: got %v; want conflict", err)
	}
	if _, err := bobC.ProjectCreate(ctx, api.ProjectCreateRequest{Name: "Bad Name"}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("bad name: got %v; want invalid_argument", err)
	}
	// Carol is not a member: the project does not exist for her.
	if _, err := carolC.ProjectMembers(ctx, "ml-team"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("non-member read: got %v; want not_found", err)
	}
	if _, err := bobC.ProjectAddMember(ctx, api.AddMemberRequest{Project: "ml-team", Email: "carol@example.test", Role: api.ProjectViewer}); err != nil {
		t.Fatal(err)
	}
	m, err := carolC.ProjectMembers(ctx, "ml-team")
	if err != nil || len(m.Members) != 2 {
		t.Fatalf("members as viewer: %v, %d members; want 2", err, len(m.Members))
	}
	// A viewer may not add members nor create allocations.
	if _, err := carolC.ProjectAddMember(ctx, api.AddMemberRequest{Project: "ml-team", Email: "carol@example.test", Role: api.ProjectOwner}); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("viewer promoting herself: got %v; want forbidden", err)
	}
	if _, err := carolC.AllocCreate(ctx, api.AllocCreateRequest{Project: "ml-team", SKU: "h200-slice", GPUs: 1}); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("viewer creating: got %v; want forbidden", err)
	}
	// The last owner cannot demote themselves.
	if _, err := bobC.ProjectAddMember(ctx, api.AddMemberRequest{Project: "ml-team", Email: bob.Email, Role: api.ProjectViewer}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("last owner demotion: got %v; want conflict", err)
	}
	if _, err := bobC.ProjectAddMember(ctx, api.AddMemberRequest{Project: "ml-team", Email: "nobody@example.test", Role: api.ProjectMember}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("unknown email: got %v; want not_found", err)
	}
	// Admins see every project's members.
	if _, err := admin.ProjectMembers(ctx, "ml-team"); err != nil {
		t.Fatalf("admin read: %v", err)
	}
}
