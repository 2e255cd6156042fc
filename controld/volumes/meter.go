package volumes

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Billing (docs/volumes.md, "Billing"; docs/decisions/0024-volume-meters.md):
// a volume is charged by the GiB-hour of its provisioned size from when it
// is ready until its removal is asked for (or it is found lost), through
// billing's volume meters, in the accrual windows of the allocations.

// startMeter starts charging v at its size from at, at the catalog's
// price now.
func startMeter(ctx context.Context, tx pgx.Tx, v api.Volume, at time.Time) error {
	price, err := catalog.VolumePrice(ctx, tx, billing.DefaultCurrency)
	if err != nil {
		return err
	}
	return billing.StartVolumeMeter(ctx, tx, billing.VolumeMeter{VolumeID: v.ID, ProjectID: v.ProjectID, UserID: v.CreatedBy,
		SizeBytes: v.SizeBytes, PricePerGiBMonthMinor: price, Currency: billing.DefaultCurrency}, at)
}

// resizeMeter charges a grown volume at its new size from at on: the
// running segment ends (its last window charged at the old size) and a
// new one starts.
func resizeMeter(ctx context.Context, tx pgx.Tx, v api.Volume, at time.Time) error {
	running, err := billing.StopVolumeMeter(ctx, tx, v.ID, at)
	if err != nil || !running {
		// A volume that was not being charged (failed meanwhile) is not
		// charged for growing.
		return err
	}
	return startMeter(ctx, tx, v, at)
}

// stopMeter stops charging a volume at `at`.
func stopMeter(ctx context.Context, tx pgx.Tx, volumeID string, at time.Time) error {
	_, err := billing.StopVolumeMeter(ctx, tx, volumeID, at)
	return err
}
