package controld_test

import (
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestAllocGetVisibility pins who may read an allocation now that
// alloc.get reads it, the caller's role, its slots and its usage in one
// round trip: members of its project of any role and operators see it
// whole; anyone else is told it does not exist.
func TestAllocGetVisibility(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	a, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	member := func(email, role string) string {
		u, tok := env.AddUser(t, email, api.RoleUser)
		if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Email: u.Email, Role: role}); err != nil {
			t.Fatal(err)
		}
		return tok
	}
	_, outsider := env.AddUser(t, "outsider@example.test", api.RoleUser)
	_, operator := env.AddUser(t, "operator@example.test", api.RoleOperator)
	tests := []struct {
		name     string
		token    string
		wantSeen bool
	}{
		{name: "admin", token: env.AdminToken, wantSeen: true},
		{name: "viewer", token: member("viewer@example.test", api.ProjectViewer), wantSeen: true},
		{name: "member", token: member("member@example.test", api.ProjectMember), wantSeen: true},
		{name: "operator outside the project", token: operator, wantSeen: true},
		{name: "user outside the project", token: outsider, wantSeen: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := env.Client(tt.token).AllocGet(ctx, a.ID)
			if !tt.wantSeen {
				if !errors.Is(err, api.ErrNotFound) {
					t.Fatalf("got %v, %+v; want not found", err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != a.ID || got.ProjectID != a.ProjectID || len(got.Slots) != 2 || got.Slots[0].AllocationID != a.ID {
				t.Fatalf("got %+v; want %s with its 2 slots", got, a.ID)
			}
		})
	}
	if _, err := admin.AllocGet(ctx, "a-000000000000"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("unknown allocation got %v; want not found", err)
	}
}
