package workloads

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
)

// meterApp keeps the app meter of w (docs/apps.md, "Prices") in step
// with its row: started when it first has a start time, stopped (its last
// window charged) when it ended. A workload without a price of its own
// has none; the allocation's release stops it too (billing.StopMeter).
func meterApp(ctx context.Context, tx pgx.Tx, w row, now time.Time) error {
	if w.AppPricePerHourMinor <= 0 || w.StartedAt == nil {
		return nil
	}
	// A start time the node reports from its future would charge the
	// time before it was reached: never later than now.
	start := earlier(*w.StartedAt, now)
	if err := billing.StartAppMeter(ctx, tx, billing.AppMeter{WorkloadID: w.ID, AllocationID: w.AllocationID,
		ProjectID: w.ProjectID, UserID: w.UserID, AppID: w.AppID, PricePerHourMinor: w.AppPricePerHourMinor,
		Currency: billing.DefaultCurrency}, start); err != nil {
		return err
	}
	if w.EndedAt == nil {
		return nil
	}
	return billing.StopAppMeter(ctx, tx, w.ID, earlier(*w.EndedAt, now), now)
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
