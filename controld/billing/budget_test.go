package billing_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestBudgetCrossingsEmailOnce: the billing loop tells each budget
// crossing (80 %, then 100 %) once, by event and by email to the project's
// members, however many ticks follow; a project without a budget, or
// under it, hears nothing.
func TestBudgetCrossingsEmailOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p, bystander := f.project(t), f.project(t)
	start := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	clock := testutil.NewClock(start)
	appendEntry(t, f.app, credit(p, 1_000_000, start))
	appendEntry(t, f.app, credit(bystander, 1_000_000, start))
	// 8 × 220 = 1760/h: $10 is 80 % spent after 27m17s, used up after 34m5s.
	f.activeAllocation(t, p, "h100-baremetal", 8, start)
	f.activeAllocation(t, bystander, "h100-baremetal", 8, start)
	err := pgx.BeginFunc(ctx, f.app, func(tx pgx.Tx) error {
		_, err := billing.SetBudget(ctx, tx, billing.Budget{ProjectID: p, Period: api.BudgetDay, AmountMinor: 10_00},
			f.userID, start)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sink := testutil.NewSMTPSink(t)
	r, err := billing.NewRunner(billing.Config{Settings: billing.Settings{Window: time.Minute}, Pool: f.app, Now: clock.Now,
		Log: testutil.Logger(t), Mailer: &billing.SMTPMailer{Addr: sink.Addr(), From: "billing@gpuaas.test"},
		Release: func(context.Context, string) (int, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	crossings := map[int]int{} // minute → crossings told
	for i := 1; i <= 45; i++ {
		clock.Advance(time.Minute)
		res, err := r.Tick(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.BudgetCrossings > 0 {
			crossings[i] = res.BudgetCrossings
		}
	}
	if len(crossings) != 2 || crossings[28] != 1 || crossings[35] != 1 {
		t.Errorf("crossings by minute: %v; want one at minute 28 (80 %%) and one at 35 (100 %%)", crossings)
	}
	var budgetEvents []event
	for _, e := range events(t, f, p) {
		if e.Kind == api.EventBillingBudget {
			budgetEvents = append(budgetEvents, e)
		}
	}
	if len(budgetEvents) != 2 || len(budgetEvents[0].Users) != 1 || budgetEvents[0].Users[0] != f.userID {
		t.Fatalf("budget events %+v; want two, told to the member", budgetEvents)
	}
	if evs := events(t, f, bystander); len(evs) != 0 {
		t.Errorf("the project without a budget got events %+v", evs)
	}
	msgs := sink.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d emails; want 2", len(msgs))
	}
	for i, want := range []string{"day budget is 80% spent", "day budget is used up"} {
		if len(msgs[i].To) != 1 || msgs[i].To[0] != f.userID+"@example.test" || !strings.Contains(msgs[i].Data, want) {
			t.Errorf("email %d: to %v, %q; want to the member, about %q", i, msgs[i].To, msgs[i].Data, want)
		}
	}
}
