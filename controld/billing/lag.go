package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuaas/gpuaas/controld/store"
)

// AccrualLag is how far charging is behind now: the longest time since a
// running meter — an allocation's or a volume's — was last charged up to
// (or started, if never charged).
// It stays below the window plus a tick while accrual keeps up; with no
// running meter it is zero.
func AccrualLag(ctx context.Context, q store.Querier, now time.Time) (time.Duration, error) {
	var oldest *time.Time
	// least() skips a NULL: the kind with no running meter.
	err := q.QueryRow(ctx, `SELECT least(
		(SELECT min(coalesce((SELECT max(u.window_end) FROM usage_charges u
			WHERE u.allocation_id = m.allocation_id), m.started_at))
		FROM billing_meters m WHERE m.stopped_at IS NULL),
		(SELECT min(coalesce((SELECT max(c.window_end) FROM volume_charges c
			WHERE c.meter_id = v.meter_id), v.started_at))
		FROM volume_meters v WHERE v.stopped_at IS NULL))`).Scan(&oldest)
	if err != nil {
		return 0, fmt.Errorf("accrual lag: %w", err)
	}
	if oldest == nil || oldest.After(now) {
		return 0, nil
	}
	return now.Sub(*oldest), nil
}
