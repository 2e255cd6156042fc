package controld_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestProjectRolesAsDocumented checks what `gpuaas project members --help`
// says each role may do (cli/project/roles.go), the regression test of
// "what project members may do is undocumented": a viewer sees but
// creates nothing; a member creates and releases any of the project's
// allocations but manages neither members, policy nor budgets; the owner
// does all of it.
func TestProjectRolesAsDocumented(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := context.Background()
	admin := env.Client(env.AdminToken)
	client := func(email, role string) *api.Client {
		_, token := env.AddUser(t, email, api.RoleUser)
		if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Project: controldtest.ProjectName, Email: email, Role: role}); err != nil {
			t.Fatal(err)
		}
		return env.Client(token)
	}
	// Plain users in each role (the admin could do everything anyway).
	owner := client("owner@example.test", api.ProjectOwner)
	viewer, member := client("viewer@example.test", api.ProjectViewer), client("member@example.test", api.ProjectMember)
	ownersAlloc, err := owner.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	allowed := func(who string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v; want allowed", who, err)
		}
	}
	forbidden := func(who string, err error) {
		t.Helper()
		if !errors.Is(err, api.ErrForbidden) {
			t.Errorf("%s: %v; want forbidden", who, err)
		}
	}
	create := api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}
	budget := api.BudgetSetRequest{Period: api.BudgetDay, AmountMinor: 100_00}
	addMember := api.AddMemberRequest{Project: controldtest.ProjectName, Email: "viewer@example.test", Role: api.ProjectViewer}
	policy := api.ProjectPolicyRequest{Project: controldtest.ProjectName, IdleReleaseAfter: "1h"}

	for name, c := range map[string]*api.Client{"viewer": viewer, "member": member} {
		_, err := c.AllocList(ctx, api.AllocListRequest{})
		allowed(name+" lists allocations", err)
		_, err = c.AllocGet(ctx, ownersAlloc.ID)
		allowed(name+" gets an allocation", err)
		_, err = c.BillingBalance(ctx, api.BillingRequest{})
		allowed(name+" sees the balance", err)
		_, err = c.BillingBudgetGet(ctx, api.BillingRequest{})
		allowed(name+" sees the budgets", err)
		_, err = c.ProjectMembers(ctx, controldtest.ProjectName)
		allowed(name+" lists members", err)
		_, err = c.BillingBudgetSet(ctx, budget)
		forbidden(name+" sets a budget", err)
		_, err = c.ProjectAddMember(ctx, addMember)
		forbidden(name+" adds a member", err)
		_, err = c.ProjectSetPolicy(ctx, policy)
		forbidden(name+" sets the idle policy", err)
	}
	_, err = viewer.AllocCreate(ctx, create)
	forbidden("viewer creates", err)
	_, err = viewer.AllocRelease(ctx, api.AllocReleaseRequest{ID: ownersAlloc.ID})
	forbidden("viewer releases", err)
	_, err = member.AllocCreate(ctx, create)
	allowed("member creates", err)
	_, err = member.AllocRelease(ctx, api.AllocReleaseRequest{ID: ownersAlloc.ID})
	allowed("member releases the owner's allocation", err)
	_, err = owner.BillingBudgetSet(ctx, budget)
	allowed("owner sets a budget", err)
	_, err = owner.ProjectAddMember(ctx, addMember)
	allowed("owner changes a role", err)
	_, err = owner.ProjectSetPolicy(ctx, policy)
	allowed("owner sets the idle policy", err)
}
