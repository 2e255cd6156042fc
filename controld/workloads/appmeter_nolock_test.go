package workloads_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
)

// TestStartAppMeterOnceLocksNothing: once a workload has its app meter,
// StartAppMeter (called on every running settle) takes no lock on the
// allocation's meter: it does not wait behind a transaction that holds
// it (the accrual, a release), and the accrual does not skip it.
func TestStartAppMeterOnceLocksNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	if err := w.tx(t, func(tx pgx.Tx) error {
		return billing.StartMeter(ctx, tx, billing.Meter{AllocationID: w.allocID, ProjectID: w.project, UserID: w.bob.UserID,
			SKU: "h100-baremetal", GPUs: 8, PricePerGPUHourMinor: 220, Currency: billing.DefaultCurrency}, t0)
	}); err != nil {
		t.Fatal(err)
	}
	app := w.priceApp(t, "jup", "", 360)
	m := billing.AppMeter{WorkloadID: "w-1", AllocationID: w.allocID, ProjectID: w.project, UserID: w.bob.UserID,
		AppID: app.ID, PricePerHourMinor: 360, Currency: billing.DefaultCurrency}
	start := func() error {
		return w.tx(t, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '2s'`); err != nil {
				return err
			}
			return billing.StartAppMeter(ctx, tx, m, t0)
		})
	}
	if err := start(); err != nil {
		t.Fatal(err)
	}
	holder, err := w.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, `SELECT 1 FROM billing_meters WHERE allocation_id = $1 FOR UPDATE`, w.allocID); err != nil {
		t.Fatal(err)
	}
	if err := start(); err != nil {
		t.Errorf("a second start while the allocation's meter is held: %v; want no wait, no lock", err)
	}
	if n := w.count(t, `SELECT count(*) FROM app_meters WHERE workload_id = 'w-1'`); n != 1 {
		t.Errorf("%d app meters; want 1", n)
	}
}
