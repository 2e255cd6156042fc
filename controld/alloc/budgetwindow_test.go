package alloc

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestCreateChecksABudgetSetWhileItWaitsForTheLock: a create whose
// insert saw no budget takes the fast path (no budget check; the COMMIT
// in the funds lock's round trip), and a refusing burn cap set while it
// waits for the project's funds lock still applies to it: the final
// round trip's guard finds the budget, skips the COMMIT, and the create
// runs again, takes the budget path and is refused with budget_exceeded,
// leaving no allocation (docs/decisions/0067-create-lock-order.md).
// Without the guard the create committed past the budget, and nothing
// enforces a burn cap or a refusing budget after the fact.
func TestCreateChecksABudgetSetWhileItWaitsForTheLock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.addSlots(t, 4)
	ctx := t.Context()
	held, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx) //nolint:errcheck // released below
	if err := lockFunds(ctx, held, f.project); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- f.create(ctx, f.pool, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}, Rules{})
	}()
	testutil.EventuallyWithin(t, 30*time.Second, "the create to wait for the funds lock", func() bool {
		var waiting int
		if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting == 1
	})
	err = pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		_, err := billing.SetBudget(ctx, tx, billing.Budget{ProjectID: f.project, BurnCapMinorPerHour: 1}, f.userID, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the create did not finish once the lock was free")
	}
	if api.CodeOf(err) != api.CodeBudgetExceeded {
		t.Fatalf("create after a budget set while it waited: %v; want budget_exceeded", err)
	}
	var allocs int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM allocations WHERE project_id = $1`, f.project).Scan(&allocs); err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Fatalf("%d allocations after the refused create; want none", allocs)
	}
}
