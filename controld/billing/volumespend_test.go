package billing_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestBudgetAndBalanceCountStorage: a budget's spend counts the storage
// charged in its period and what running volumes accrued since, its burn
// and the balance's burn (and so the runway) count running volumes; a
// stopped volume burns nothing.
func TestBudgetAndBalanceCountStorage(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	start := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	appendEntry(t, f.app, credit(p, 1_000_000, start))
	// 7300 GiB at $0.10 per GiB-month: 100 cents an hour.
	v := f.volume(t, p, 7300*gib, 10, start)
	a := f.activeAllocation(t, p, "h100-slice", 1, start) // 250 an hour
	err := pgx.BeginFunc(ctx, f.app, func(tx pgx.Tx) error {
		_, err := billing.SetBudget(ctx, tx, billing.Budget{ProjectID: p, Period: api.BudgetDay, AmountMinor: 100_00},
			f.userID, start)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	acct, err := billing.AccountOf(ctx, f.app, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if acct.BurnRateMinorPerHour != 350 || acct.StorageBurnMinorPerHour != 100 || acct.RunningVolumes != 1 || acct.RunningMeters != 1 {
		t.Errorf("account %+v; want burn 350 (100 of it storage), 1 volume, 1 allocation", acct)
	}
	// Charged up to 30 min, read at 45 min: 30 min charged, 15 accrued.
	accrue(t, f.app, start.Add(30*time.Minute))
	bs, err := billing.Budgets(ctx, f.app, p, start.Add(45*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	wantSpent := cost(250, 1, 45*60) + volumeCost(10, 7300*gib, 45*60)
	if len(bs) != 1 || bs[0].SpentMinor != wantSpent || bs[0].BurnMinorPerHour != 350 {
		t.Fatalf("budgets %+v; want spent %d (storage %d), burn 350", bs, wantSpent, volumeCost(10, 7300*gib, 45*60))
	}
	stopVolume(t, f.app, v, start.Add(time.Hour))
	stop(t, f.app, a, start.Add(time.Hour))
	acct, err = billing.AccountOf(ctx, f.app, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if acct.BurnRateMinorPerHour != 0 || acct.RunningVolumes != 0 {
		t.Errorf("account after the stops %+v; want no burn", acct)
	}
	bs, err = billing.Budgets(ctx, f.app, p, start.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(250 + 100); bs[0].SpentMinor != want {
		t.Errorf("spent after an hour of both: %d; want %d", bs[0].SpentMinor, want)
	}
	mustVerify(t, f.app)
}
