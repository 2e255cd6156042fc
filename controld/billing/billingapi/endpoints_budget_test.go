package billingapi_test

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func (f *fixture) budgetSet(t *testing.T, r *endpoint.Request, req api.BudgetSetRequest) (*api.Budget, error) {
	t.Helper()
	return endpointtest.Mutate[api.Budget](context.Background(), f.Run,
		f.Find(t, api.EndpointBillingBudgetSet), r, req)
}

// TestBudgetSetRules: only the project's owner (or an admin) sets a
// budget; a user budget names a member of the project, by email or id;
// the action defaults to refuse. A refusal writes no budget and no audit
// row; a budget set writes one audit row and tells every member.
func TestBudgetSetRules(t *testing.T) {
	f := newFixture(t, billing.Settings{})
	month := api.BudgetSetRequest{Project: f.project, Period: api.BudgetMonth, AmountMinor: 50_000}
	withUser := func(u string) api.BudgetSetRequest { r := month; r.User = u; return r }
	for _, tc := range []struct {
		name string
		r    *endpoint.Request
		req  api.BudgetSetRequest
		want api.Code
	}{
		{"member is not the owner", as(f.bob), month, api.CodeForbidden},
		{"outsider", as(f.carol), month, api.CodeNotFound},
		{"user not in the project", as(f.alice), withUser(f.carol + "@example.test"), api.CodeInvalidArgument},
		{"no such user", as(f.alice), withUser("nobody@example.test"), api.CodeNotFound},
		{"no such user id", as(f.alice), withUser("u-nobody"), api.CodeNotFound},
		{"bad action", as(f.alice), api.BudgetSetRequest{Project: f.project, BurnCapMinorPerHour: 10, Action: "explode"}, api.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := f.budgetSet(t, tc.r, tc.req); codeOf(err) != tc.want {
				t.Errorf("got %v (%v); want %s", codeOf(err), err, tc.want)
			}
		})
	}
	if n := f.count(t, `SELECT count(*) FROM budgets`); n != 0 {
		t.Errorf("budgets after refusals: got %d; want 0", n)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_logs WHERE action = $1`, api.EndpointBillingBudgetSet); n != 0 {
		t.Errorf("audit rows after refusals: got %d; want 0", n)
	}

	// By email in the body's project, and by id in the header's.
	b, err := f.budgetSet(t, as(f.alice), withUser(f.bob+"@example.test"))
	if err != nil {
		t.Fatalf("set bob's budget: %v", err)
	}
	if b.UserID != f.bob || b.User != f.bob+"@example.test" || b.Action != api.BudgetRefuse || b.ProjectID != f.projectID {
		t.Errorf("bob's budget: got user %s (%s) action %q project %s; want %s, refuse, %s",
			b.UserID, b.User, b.Action, b.ProjectID, f.bob, f.projectID)
	}
	hdr := as(f.alice)
	hdr.Project = f.projectID
	if _, err := f.budgetSet(t, hdr, api.BudgetSetRequest{User: f.bob, BurnCapMinorPerHour: 700}); err != nil {
		t.Fatalf("set bob's burn cap by id in the header's project: %v", err)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_logs WHERE action = $1 AND target_id = $2 AND actor_id = $3`,
		api.EndpointBillingBudgetSet, f.projectID+"/"+f.bob, f.alice); n != 2 {
		t.Errorf("audit rows of bob's budget: got %d; want 2", n)
	}
	if n := f.count(t, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND users @> ARRAY[$2, $3]::text[]`,
		api.EventBillingBudgetChanged, f.alice, f.bob); n != 2 {
		t.Errorf("budget events to both members: got %d; want 2", n)
	}
}

// TestBudgetClearPeriodKeepsTheBurnCap: clearing one period of a budget
// that also has a burn cap answers the burn cap alone (no period, amount
// or spend) and leaves it in place; budget get shows it with the user's
// email; clearing without a period removes the rest.
func TestBudgetClearPeriodKeepsTheBurnCap(t *testing.T) {
	f := newFixture(t, billing.Settings{})
	ctx := context.Background()
	if _, err := f.budgetSet(t, as(f.alice), api.BudgetSetRequest{Project: f.project, User: f.bob, Period: api.BudgetDay,
		AmountMinor: 9_000, BurnCapMinorPerHour: 300, Action: api.BudgetRelease}); err != nil {
		t.Fatal(err)
	}
	clear := f.Find(t, api.EndpointBillingBudgetClear)
	left, err := endpointtest.Mutate[api.Budget](ctx, f.Run, clear, as(f.alice),
		api.BudgetClearRequest{Project: f.project, User: f.bob, Period: api.BudgetDay})
	if err != nil {
		t.Fatalf("clear the day: %v", err)
	}
	if left.Period != "" || left.AmountMinor != 0 || left.BurnCapMinorPerHour != 300 || left.Action != api.BudgetRelease {
		t.Errorf("after clearing the day: got period %q amount %d burn cap %d action %q; want none, 0, 300, release",
			left.Period, left.AmountMinor, left.BurnCapMinorPerHour, left.Action)
	}
	list, err := endpointtest.Read[api.BudgetList](ctx, f.Find(t, api.EndpointBillingBudgetGet),
		as(f.bob), api.BillingRequest{Project: f.project})
	if err != nil {
		t.Fatalf("budget get as a member: %v", err)
	}
	if len(list.Budgets) != 1 || list.Budgets[0].User != f.bob+"@example.test" || list.Budgets[0].BurnCapMinorPerHour != 300 ||
		list.Project != f.project {
		t.Errorf("budget get: got %+v; want bob's burn cap of 300 in %s", list, f.project)
	}
	if _, err := endpointtest.Mutate[api.Budget](ctx, f.Run, clear, as(f.bob),
		api.BudgetClearRequest{Project: f.project, User: f.bob}); codeOf(err) != api.CodeForbidden {
		t.Errorf("clear as a member: got %v; want forbidden", err)
	}
	if _, err := endpointtest.Mutate[api.Budget](ctx, f.Run, clear, as(f.alice),
		api.BudgetClearRequest{Project: f.project, User: f.bob}); err != nil {
		t.Fatalf("clear: %v", err)
	}
	if n := f.count(t, `SELECT count(*) FROM budgets`); n != 0 {
		t.Errorf("budgets after clearing: got %d; want 0", n)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_logs WHERE action = $1`, api.EndpointBillingBudgetClear); n != 2 {
		t.Errorf("clear audit rows: got %d; want 2", n)
	}
}
