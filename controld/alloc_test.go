package controld_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestAllocLifecycleThroughAPI(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	ctx := context.Background()

	who, err := c.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if who.User.Email != controldtest.AdminEmail || who.User.Role != api.RoleAdmin {
		t.Fatalf("whoami got %+v; want the admin", who.User)
	}
	cat, err := c.CatalogList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.SKUs) == 0 {
		t.Fatal("catalog is empty")
	}

	a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if a.State != api.AllocProvisioning || len(a.Slots) != 2 {
		t.Fatalf("got state %s with %d slots; want provisioning with 2", a.State, len(a.Slots))
	}
	if a.Slots[0].NUMANode != a.Slots[1].NUMANode {
		t.Fatalf("slots on NUMA nodes %d and %d; want one NUMA node", a.Slots[0].NUMANode, a.Slots[1].NUMANode)
	}
	got, err := c.AllocGet(ctx, a.ID)
	if err != nil || got.ID != a.ID {
		t.Fatalf("get: %v %+v", err, got)
	}
	list, err := c.AllocList(ctx, api.AllocListRequest{})
	if err != nil || len(list.Allocations) != 1 {
		t.Fatalf("list: %v, %d allocations; want 1", err, len(list.Allocations))
	}
	rel, err := c.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID})
	if err != nil {
		t.Fatal(err)
	}
	if rel.State != api.AllocReleasing {
		t.Fatalf("release got %s; want releasing", rel.State)
	}
	if _, err := c.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("second release got %v; want conflict", err)
	}
}

func TestAllocCreateBadInput(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	// Someone in no project has no default project either; the admin's
	// default (testproj) would be used.
	_, projectlessToken := env.AddUser(t, "projectless@example.test", api.RoleUser)
	tests := []struct {
		name string
		req  api.AllocCreateRequest
		c    *api.Client
		want error
	}{
		{"unknown sku", api.AllocCreateRequest{SKU: "nope", GPUs: 1}, c, api.ErrNotFound},
		{"gpu count not offered", api.AllocCreateRequest{SKU: "h200-slice", GPUs: 3}, c, api.ErrInvalidArgument},
		{"zero gpus", api.AllocCreateRequest{SKU: "h200-slice"}, c, api.ErrInvalidArgument},
		{"unknown project", api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1, Project: "ghost"}, c, api.ErrNotFound},
		{"no project", api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}, env.Client(projectlessToken, api.WithProject("")), api.ErrInvalidArgument},
		{"not logged in", api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}, env.Client(""), api.ErrUnauthenticated},
		{"no capacity", api.AllocCreateRequest{SKU: "h100-slice", GPUs: 1}, c, api.ErrNoCapacity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.c.AllocCreate(ctx, tt.req)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v; want %v", err, tt.want)
			}
		})
	}
	list, err := c.AllocList(ctx, api.AllocListRequest{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Allocations) != 0 {
		t.Fatalf("bad requests left %d allocations; want none", len(list.Allocations))
	}
}

// TestAllocCreateProjectErrorsBeforeSKUErrors: the create reads the
// project, the caller's role and the SKU in one round trip, and still
// answers the project's error (unknown, not a member, role too low)
// before the SKU's, as when they were read one by one; a member's create
// by project name or id is allowed.
func TestAllocCreateProjectErrorsBeforeSKUErrors(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	projects, err := admin.ProjectList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(projects.Projects) != 1 {
		t.Fatalf("admin has %d projects; want 1", len(projects.Projects))
	}
	proj := projects.Projects[0]
	member := func(email, role string) *api.Client {
		u, tok := env.AddUser(t, email, api.RoleUser)
		if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Email: u.Email, Role: role}); err != nil {
			t.Fatal(err)
		}
		return env.Client(tok, api.WithProject(proj.Name))
	}
	viewer := member("viewer@example.test", api.ProjectViewer)
	writer := member("writer@example.test", api.ProjectMember)
	_, outsiderTok := env.AddUser(t, "outsider@example.test", api.RoleUser)
	outsider := env.Client(outsiderTok, api.WithProject(proj.Name))
	tests := []struct {
		name    string
		c       *api.Client
		req     api.AllocCreateRequest
		want    error
		wantMsg string
	}{
		{"unknown project and sku", admin, api.AllocCreateRequest{SKU: "nope", GPUs: 1, Project: "ghost"}, api.ErrNotFound, `project "ghost" not found`},
		{"outsider, unknown sku", outsider, api.AllocCreateRequest{SKU: "nope", GPUs: 1}, api.ErrNotFound, "project"},
		{"viewer, unknown sku", viewer, api.AllocCreateRequest{SKU: "nope", GPUs: 1}, api.ErrForbidden, "does not allow"},
		{"member, unknown sku", writer, api.AllocCreateRequest{SKU: "nope", GPUs: 1}, api.ErrNotFound, `unknown SKU "nope"`},
		{"member by id", writer, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1, Project: proj.ID}, nil, ""},
		{"member by name", writer, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1, Project: proj.Name}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := tt.c.AllocCreate(ctx, tt.req)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if a.ProjectID != proj.ID {
					t.Fatalf("created in %s; want %s", a.ProjectID, proj.ID)
				}
				return
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("got %v; want %v mentioning %q", err, tt.want, tt.wantMsg)
			}
		})
	}
}
