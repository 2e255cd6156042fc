package controld_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// wantBudgetExceeded checks a refusal: the catalog code and the message
// naming the numbers.
func wantBudgetExceeded(t *testing.T, err error, what string, inMessage ...string) {
	t.Helper()
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeBudgetExceeded {
		t.Fatalf("%s: got %v; want budget_exceeded", what, err)
	}
	for _, s := range inMessage {
		if !strings.Contains(e.Message, s) {
			t.Errorf("%s: message %q; want it to say %q", what, e.Message, s)
		}
	}
}

// TestBudgetSetGetClear: owners and admins set and clear budgets, members
// read them; bad input is invalid_argument and changes nothing.
func TestBudgetSetGetClear(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute})
	ctx := t.Context()
	admin := e.Client(e.AdminToken)
	bob, bobToken := e.AddUser(t, "bob@example.test", api.RoleUser)
	if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Email: bob.Email, Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}
	_, strangerToken := e.AddUser(t, "stranger@example.test", api.RoleUser)
	member, stranger := e.Client(bobToken), e.Client(strangerToken)

	b, err := admin.BillingBudgetSet(ctx, api.BudgetSetRequest{Period: api.BudgetDay, AmountMinor: 100})
	if err != nil {
		t.Fatal(err)
	}
	if b.Action != api.BudgetRefuse || b.AmountMinor != 100 || b.PeriodEnd == nil ||
		!b.PeriodEnd.Equal(time.Date(2026, 7, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("set: got %+v; want $1.00 a day, refuse, resetting at midnight UTC", b)
	}
	if _, err := admin.BillingBudgetSet(ctx, api.BudgetSetRequest{User: bob.Email, BurnCapMinorPerHour: 50,
		Action: api.BudgetRelease}); err != nil {
		t.Fatal(err)
	}
	before := dbSnapshot(t, e.Env)
	for _, tc := range []struct {
		name string
		c    *api.Client
		req  api.BudgetSetRequest
		want error
	}{
		{"by a member", member, api.BudgetSetRequest{BurnCapMinorPerHour: 10}, api.ErrForbidden},
		{"by a stranger", stranger, api.BudgetSetRequest{Project: e.Project.Name, BurnCapMinorPerHour: 10}, api.ErrNotFound},
		{"no cap", admin, api.BudgetSetRequest{}, api.ErrInvalidArgument},
		{"unknown period", admin, api.BudgetSetRequest{Period: "year", AmountMinor: 100}, api.ErrInvalidArgument},
		{"amount without a period", admin, api.BudgetSetRequest{AmountMinor: 100}, api.ErrInvalidArgument},
		{"period without an amount", admin, api.BudgetSetRequest{Period: api.BudgetDay}, api.ErrInvalidArgument},
		{"negative amount", admin, api.BudgetSetRequest{Period: api.BudgetDay, AmountMinor: -1}, api.ErrInvalidArgument},
		{"negative burn cap", admin, api.BudgetSetRequest{BurnCapMinorPerHour: -5}, api.ErrInvalidArgument},
		{"unknown action", admin, api.BudgetSetRequest{BurnCapMinorPerHour: 5, Action: "explode"}, api.ErrInvalidArgument},
		{"user not a member", admin, api.BudgetSetRequest{User: "stranger@example.test", BurnCapMinorPerHour: 5}, api.ErrInvalidArgument},
		{"unknown user", admin, api.BudgetSetRequest{User: "ghost@example.test", BurnCapMinorPerHour: 5}, api.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.c.BillingBudgetSet(ctx, tc.req); !errors.Is(err, tc.want) {
				t.Errorf("got %v; want %v", err, tc.want)
			}
		})
	}
	if _, err := member.BillingBudgetClear(ctx, api.BudgetClearRequest{}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("clear by a member: %v; want forbidden", err)
	}
	sameSnapshot(t, "refused budget changes", before, dbSnapshot(t, e.Env))

	l, err := member.BillingBudgetGet(ctx, api.BillingRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Budgets) != 2 || l.Budgets[0].UserID != "" || l.Budgets[1].User != bob.Email ||
		l.Budgets[1].BurnCapMinorPerHour != 50 || l.Budgets[1].Action != api.BudgetRelease {
		t.Fatalf("get by a member: %+v; want the project's budget then bob's", l.Budgets)
	}
	if _, err := stranger.BillingBudgetGet(ctx, api.BillingRequest{Project: e.Project.Name}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("get by a stranger: %v; want not found", err)
	}
	if _, err := admin.BillingBudgetClear(ctx, api.BudgetClearRequest{User: bob.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.BillingBudgetClear(ctx, api.BudgetClearRequest{User: bob.ID}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("clear again: %v; want not found", err)
	}
	if l, err = admin.BillingBudgetGet(ctx, api.BillingRequest{}); err != nil || len(l.Budgets) != 1 {
		t.Fatalf("after clear: %+v, %v; want the project's budget alone", l, err)
	}
}

// TestAllocCreateRefusedOverBudget is budgets' enforcement (docs/budgets.md): a
// create whose first hour would take the period's spend over the cap, or
// whose price would take the burn over the burn cap, is refused with
// budget_exceeded, reserves nothing and is audited; under the caps it
// goes ahead. A user's budget binds that user alone.
func TestAllocCreateRefusedOverBudget(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute})
	e.credit(t, 100_00)
	ctx := t.Context()
	admin := e.Client(e.AdminToken)
	bob, bobToken := e.AddUser(t, "bob@example.test", api.RoleUser)
	if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Email: bob.Email, Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}
	member := e.Client(bobToken)
	// $5 a day; h200-slice costs 350/GPU-hour.
	if _, err := admin.BillingBudgetSet(ctx, api.BudgetSetRequest{Period: api.BudgetDay, AmountMinor: 500}); err != nil {
		t.Fatal(err)
	}
	e.activate(t, admin, "h200-slice", 1)
	e.clock.Advance(30 * time.Minute) // 175 accrued, not yet billed: the ledger lags
	before := dbSnapshot(t, e.Env)
	_, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	wantBudgetExceeded(t, err, "spend cap", "$5.00 per day", "$1.75 is spent", "$3.50", "resets 2026-07-02 00:00 UTC")
	_, err = admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1, Queue: true})
	wantBudgetExceeded(t, err, "queued")
	q, err := admin.AllocQuote(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil || !strings.Contains(q.BudgetExceeded, "budget exceeded") {
		t.Errorf("quote: %+v, %v; want it to say the budget is exceeded", q, err)
	}
	after := dbSnapshot(t, e.Env)
	after["audit_logs"], before["audit_logs"] = "", ""
	sameSnapshot(t, "creates over budget", before, after)
	var detail []byte
	if err := e.Server.Pool().QueryRow(ctx, `SELECT detail FROM audit_logs WHERE action = 'alloc.create_refused'
		ORDER BY id DESC LIMIT 1`).Scan(&detail); err != nil || !strings.Contains(string(detail), `"budget_exceeded"`) {
		t.Errorf("refusal audit row %s, %v; want budget_exceeded", detail, err)
	}

	// Raised to $10: the same create goes ahead.
	if _, err := admin.BillingBudgetSet(ctx, api.BudgetSetRequest{Period: api.BudgetDay, AmountMinor: 10_00}); err != nil {
		t.Fatal(err)
	}
	e.activate(t, admin, "h200-slice", 1)

	// A burn cap of $8/h: 700 running + 350 is over it.
	if _, err := admin.BillingBudgetSet(ctx, api.BudgetSetRequest{BurnCapMinorPerHour: 800}); err != nil {
		t.Fatal(err)
	}
	_, err = admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	wantBudgetExceeded(t, err, "burn cap", "$8.00/h", "$7.00/h already running", "$3.50/h for this one")
	if _, err := admin.BillingBudgetClear(ctx, api.BudgetClearRequest{}); err != nil {
		t.Fatal(err)
	}

	// Bob's own $1/h burn cap refuses bob's 4 GPUs, not the admin's.
	if _, err := admin.BillingBudgetSet(ctx, api.BudgetSetRequest{User: bob.Email, BurnCapMinorPerHour: 100}); err != nil {
		t.Fatal(err)
	}
	_, err = member.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	wantBudgetExceeded(t, err, "bob's burn cap", "your budget in project testproj")
	if _, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}); err != nil {
		t.Errorf("admin's create under bob's budget: %v; want it accepted", err)
	}
}

// budgetEvents reads the billing.budget and alloc.notice events in the
// outbox, oldest first.
func budgetEvents(t *testing.T, e *billingEnv) (crossings []api.BudgetCrossing, notices []api.AllocNotice) {
	t.Helper()
	rows, err := e.Server.Pool().Query(t.Context(), `SELECT kind, payload FROM outbox_events
		WHERE kind IN ($1, $2) ORDER BY id`, api.EventBillingBudget, api.EventAllocNotice)
	if err != nil {
		t.Fatal(err)
	}
	var kind string
	var payload []byte
	_, err = pgx.ForEachRow(rows, []any{&kind, &payload}, func() error {
		if kind == api.EventBillingBudget {
			var c api.BudgetCrossing
			crossings = append(crossings, c)
			return json.Unmarshal(payload, &crossings[len(crossings)-1])
		}
		notices = append(notices, api.AllocNotice{})
		return json.Unmarshal(payload, &notices[len(notices)-1])
	})
	if err != nil {
		t.Fatal(err)
	}
	return crossings, notices
}

// TestBudgetWarnsOncePerCrossing: the accrual's crossing of 80 % emits
// exactly one billing.budget event and one alloc.notice per running
// allocation of the scope, however many ticks follow; 100 % one more;
// the next period re-arms both.
func TestBudgetWarnsOncePerCrossing(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute})
	e.credit(t, 100_00)
	ctx := t.Context()
	admin := e.Client(e.AdminToken)
	if _, err := admin.BillingBudgetSet(ctx, api.BudgetSetRequest{Period: api.BudgetDay, AmountMinor: 500}); err != nil {
		t.Fatal(err)
	}
	a := e.activate(t, admin, "h200-slice", 1) // 350/h: 80 % of 500 after 68m35s, 100 % after 85m43s
	levels := func() []int {
		cs, _ := budgetEvents(t, e)
		var out []int
		for _, c := range cs {
			out = append(out, c.Percent)
		}
		return out
	}
	for i := 0; i < 68; i++ {
		e.clock.Advance(time.Minute)
		e.tick(t)
	}
	if got := levels(); len(got) != 0 {
		t.Fatalf("after 68 minutes (79 %%): crossings %v; want none", got)
	}
	e.clock.Advance(time.Minute)
	if res := e.tick(t); res.BudgetCrossings != 1 {
		t.Errorf("tick at 69 minutes: %d crossings; want 1", res.BudgetCrossings)
	}
	for i := 0; i < 10; i++ {
		e.clock.Advance(time.Minute)
		e.tick(t)
	}
	cs, ns := budgetEvents(t, e)
	if len(cs) != 1 || cs[0].Percent != 80 || cs[0].AmountMinor != 500 || cs[0].SpentMinor < 400 {
		t.Fatalf("crossings %+v; want exactly one at 80 %%", cs)
	}
	if len(ns) != 1 || ns[0].AllocationID != a.ID || ns[0].Kind != api.NoticeBudget ||
		!strings.Contains(ns[0].Message, "day budget is 80% spent") {
		t.Fatalf("notices %+v; want one budget notice for %s", ns, a.ID)
	}
	for i := 0; i < 10; i++ {
		e.clock.Advance(time.Minute)
		e.tick(t)
	}
	if got := levels(); len(got) != 2 || got[1] != 100 {
		t.Fatalf("after 89 minutes: crossings %v; want 80 then 100", got)
	}
	// The allocation is still running (action refuse).
	if got, err := admin.AllocGet(ctx, a.ID); err != nil || got.State != api.AllocActive {
		t.Fatalf("allocation %+v, %v; want it active under a refuse budget", got, err)
	}
	// Next day: a new period, both re-armed; the day's spend at 350/h
	// crosses 80 % again. (Usage counts in the period it is charged in: the
	// tick before midnight charges the old day.)
	e.clock.Advance(time.Date(2026, 7, 1, 23, 59, 30, 0, time.UTC).Sub(e.clock.Now()))
	e.tick(t)
	e.clock.Advance(time.Minute)
	e.tick(t)
	if got := levels(); len(got) != 2 {
		t.Fatalf("at midnight: crossings %v; want no new one", got)
	}
	for i := 0; i < 70; i++ {
		e.clock.Advance(time.Minute)
		e.tick(t)
	}
	if got := levels(); len(got) != 3 || got[2] != 80 {
		t.Fatalf("next day: crossings %v; want a new 80 %% crossing", got)
	}
}

// TestBudgetReleaseAtCap: a budget with action release, once its spend
// reaches the cap, releases the running allocations of its scope through
// the platform path (actor system:billing, reason budget), and only
// those.
func TestBudgetReleaseAtCap(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute})
	e.credit(t, 100_00)
	ctx := t.Context()
	admin := e.Client(e.AdminToken)
	bob, bobToken := e.AddUser(t, "bob@example.test", api.RoleUser)
	if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Email: bob.Email, Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}
	// Bob: $5 a day, released at the cap; 350/h reaches it in 85m43s.
	if _, err := admin.BillingBudgetSet(ctx, api.BudgetSetRequest{User: bob.Email, Period: api.BudgetDay, AmountMinor: 500,
		Action: api.BudgetRelease}); err != nil {
		t.Fatal(err)
	}
	bobs := e.activate(t, e.Client(bobToken), "h200-slice", 1)
	admins := e.activate(t, admin, "h200-slice", 1)
	released := 0
	for i := 0; i < 90; i++ {
		e.clock.Advance(time.Minute)
		res := e.tick(t)
		released += res.BudgetReleased
		if res.BudgetReleased > 0 && i < 85 {
			t.Fatalf("released at minute %d, under the cap", i+1)
		}
	}
	if released != 1 {
		t.Fatalf("released %d; want bob's allocation alone", released)
	}
	got, err := admin.AllocGet(ctx, bobs.ID)
	if err != nil || got.State != api.AllocReleasing || got.Reason != "budget" {
		t.Fatalf("bob's allocation %+v, %v; want releasing for budget", got, err)
	}
	if got, err := admin.AllocGet(ctx, admins.ID); err != nil || got.State != api.AllocActive {
		t.Fatalf("admin's allocation %+v, %v; want it active", got, err)
	}
	var actor string
	if err := e.Server.Pool().QueryRow(ctx, `SELECT actor_id FROM audit_logs WHERE action = 'billing.budget_release'
		AND target_id = $1`, bobs.ID).Scan(&actor); err != nil || actor != "system:billing" {
		t.Fatalf("release audit row by %q, %v; want system:billing", actor, err)
	}
}

// TestQueuedRequestOverBudgetAtPlacementFails: a queued request is checked
// against the budgets again when capacity frees. One that would take the
// burn over its project's burn cap fails with the reason, holds no slots,
// and the line moves on to the next project's request.
func TestQueuedRequestOverBudgetAtPlacementFails(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	ctx := t.Context()
	first, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	head, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8, Queue: true})
	if err != nil || !head.Queued {
		t.Fatalf("queue the head: %v %+v", err, head)
	}
	if _, err := c.ProjectCreate(ctx, api.ProjectCreateRequest{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	env.Credit(t, "other", 100_00)
	behind, err := c.AllocCreate(ctx, api.AllocCreateRequest{Project: "other", SKU: "h100-baremetal", GPUs: 8, Queue: true})
	if err != nil || !behind.Queued {
		t.Fatalf("queue behind it: %v %+v", err, behind)
	}
	// $20/h: the first allocation's $17.60/h and the head's would be $35.20/h.
	if _, err := c.BillingBudgetSet(ctx, api.BudgetSetRequest{BurnCapMinorPerHour: 20_00}); err != nil {
		t.Fatal(err)
	}
	freeAllocSlots(t, env, first.ID)
	testutil.EventuallyWithin(t, 10*time.Second, "the request behind the head to be placed", func() bool {
		return getAlloc(t, c, behind.ID).State == api.AllocProvisioning
	})
	got := getAlloc(t, c, head.ID)
	if got.State != api.AllocFailed || got.Queued || len(got.Slots) != 0 || !strings.Contains(got.Reason, "budget exceeded") ||
		!strings.Contains(got.Reason, "$20.00/h") || !strings.Contains(got.Reason, "left the queue") {
		t.Fatalf("head: %s queued=%v with %d slots (%q); want failed over the budget, out of the queue, no slots",
			got.State, got.Queued, len(got.Slots), got.Reason)
	}
	if n := sqlCount(t, env, `SELECT count(*) FROM slots WHERE allocation_id = $1`, head.ID); n != 0 {
		t.Errorf("the failed head holds %d slots; want 0", n)
	}
}
