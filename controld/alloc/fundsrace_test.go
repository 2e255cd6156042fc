package alloc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestCreateRace32OnFundsAndSlots runs 32 creates of one GPU at once
// against a project whose balance allows k of them (10 minutes of runway
// at $3.50/h each) and a fleet with m free slots: exactly min(k, m) are
// created, every other one is refused with insufficient_funds or
// no_capacity (never a deadlock, a serialization failure or any other
// error), no slot is booked twice, no allocation lacks its slot, and the
// balance covers the runway of what was created: no overdraft. The funds
// lock taken last (docs/decisions/0042-funds-lock-last.md) against the
// slots' row locks taken first.
func TestCreateRace32OnFundsAndSlots(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ k, m int }{{10, 24}, {24, 10}, {16, 16}, {40, 40}} {
		t.Run(fmt.Sprintf("k=%d,m=%d", c.k, c.m), func(t *testing.T) {
			t.Parallel()
			raceCreates(t, c.k, c.m, false)
		})
	}
}

// TestCreateRace32OnBudgetAndSlots is TestCreateRace32OnFundsAndSlots
// with the money plentiful and a project budget's burn cap allowing k
// allocations: the path whose COMMIT waits for the budget check, under
// the funds lock (docs/decisions/0067-create-lock-order.md). Exactly
// min(k, m) are created, the rest refused with budget_exceeded or
// no_capacity, and the burn stays within the cap.
func TestCreateRace32OnBudgetAndSlots(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ k, m int }{{10, 24}, {24, 10}} {
		t.Run(fmt.Sprintf("k=%d,m=%d", c.k, c.m), func(t *testing.T) {
			t.Parallel()
			raceCreates(t, c.k, c.m, true)
		})
	}
}

// raceCreates races 32 creates for k allocations' worth of funds (or,
// with budget, of a budget's burn cap) and m free slots.
func raceCreates(t *testing.T, k, m int, budget bool) {
	const racers = 32
	f := newFixture(t)
	ctx := t.Context()
	f.addSlots(t, m)
	rules := Rules{MinRunway: 10 * time.Minute}
	refused := api.CodeInsufficientFunds
	if budget {
		refused = api.CodeBudgetExceeded
		f.credit(t, 1_000_000)
		err := pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
			_, err := billing.SetBudget(ctx, tx, billing.Budget{ProjectID: f.project, BurnCapMinorPerHour: 350 * int64(k)},
				f.userID, time.Now())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	} else {
		// n allocations at $3.50/h need ceil(350n/6) for 10 minutes: this
		// balance covers k and not k+1.
		f.credit(t, (350*int64(k)+5)/6)
	}
	pool, err := store.Open(ctx, f.dsn, racers+1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	errs := make(chan error, racers)
	start := make(chan struct{})
	for range racers {
		go func() {
			<-start
			errs <- f.create(context.Background(), pool, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}, rules)
		}()
	}
	close(start)
	counts := map[api.Code]int{}
	for range racers {
		switch err := <-errs; api.CodeOf(err) {
		case refused, api.CodeNoCapacity:
			counts[api.CodeOf(err)]++
		default:
			if err != nil {
				t.Errorf("a racing create: %v; want success, %s or no_capacity", err, refused)
				continue
			}
			counts["created"]++
		}
	}
	want := min(k, m, racers)
	t.Logf("k=%d m=%d: %v", k, m, counts)
	if counts["created"] != want {
		t.Errorf("created %d; want min(k, m, %d) = %d (%v)", counts["created"], racers, want, counts)
	}
	if k < m && k < racers && counts[refused] == 0 {
		t.Errorf("no create refused with %s with enough for %d of %d: %v", refused, k, racers, counts)
	}
	if m < k && m < racers && counts[api.CodeNoCapacity] == 0 {
		t.Errorf("no create refused for capacity with slots for %d of %d: %v", m, racers, counts)
	}

	var allocs, reserved, distinct, short, keys int
	if err := f.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM allocations WHERE state = 'provisioning' AND node_id IS NOT NULL),
		(SELECT count(*) FROM slots WHERE state = 'reserved'),
		(SELECT count(DISTINCT allocation_id) FROM slots WHERE state = 'reserved'),
		(SELECT count(*) FROM allocations a WHERE (SELECT count(*) FROM slots s
			WHERE s.allocation_id = a.id AND s.state = 'reserved' AND s.node_id = a.node_id) <> a.gpus),
		(SELECT count(*) FROM idempotency_keys)`).Scan(&allocs, &reserved, &distinct, &short, &keys); err != nil {
		t.Fatal(err)
	}
	if allocs != want || reserved != want || distinct != want || short != 0 || keys != want {
		t.Errorf("%d provisioning allocations, %d reserved slots of %d allocations, %d allocations without exactly their "+
			"GPUs' slots, %d idempotency keys; want %d, %d, %d, 0, %d", allocs, reserved, distinct, short, keys, want, want, want, want)
	}
	var total int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM allocations`).Scan(&total); err != nil || total != want {
		t.Errorf("allocations in all: %d (%v); want %d, the refused ones rolled back", total, err, want)
	}
	funds, err := FundsFor(ctx, f.pool, f.project, 0, rules)
	if err != nil {
		t.Fatal(err)
	}
	if !funds.Enough() {
		t.Errorf("overdraft: balance %d does not cover %d needed at %d/h", funds.BalanceMinor, funds.NeededMinor, funds.BurnMinorPerHour)
	}
}
