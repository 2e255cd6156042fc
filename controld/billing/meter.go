package billing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Meter is what StartMeter needs of an allocation: who pays, and the
// price it runs at (its SKU's price when it became active).
type Meter struct {
	AllocationID         string
	ProjectID            string
	UserID               string // who created it: their budget counts it
	SKU                  string
	GPUs                 int
	PricePerGPUHourMinor int64
	Currency             string
}

// StartMeter starts charging an allocation that has just become active.
// controld/alloc calls it in the transaction of the transition to active;
// a meter that exists is left alone.
func StartMeter(ctx context.Context, tx pgx.Tx, m Meter, at time.Time) error {
	_, err := tx.Exec(ctx, `INSERT INTO billing_meters
		(allocation_id, project_id, sku_id, gpus, price_per_gpu_hour_minor, currency, started_at, user_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (allocation_id) DO NOTHING`,
		m.AllocationID, m.ProjectID, m.SKU, m.GPUs, m.PricePerGPUHourMinor, m.Currency, at, m.UserID)
	if err != nil {
		return fmt.Errorf("start meter of %s: %w", m.AllocationID, err)
	}
	return nil
}

// StopMeter stops an allocation's meter at `at` and charges its final,
// partial window, in tx (controld/alloc calls it when the allocation
// leaves active: billing stops at the release request, not when hostd is
// done). It returns the allocation's usage so far; an allocation that
// never became active has no meter and costs nothing.
func StopMeter(ctx context.Context, tx pgx.Tx, allocationID string, at time.Time) (Usage, error) {
	// Locking the meter first makes a concurrent accrual skip it, or, if
	// the accrual got there first, waits for it to commit, so that the
	// final window starts where the accrual's ended.
	var stopped *time.Time
	err := tx.QueryRow(ctx, `SELECT stopped_at FROM billing_meters WHERE allocation_id = $1 FOR UPDATE`, allocationID).Scan(&stopped)
	if errors.Is(err, pgx.ErrNoRows) {
		return Usage{AllocationID: allocationID, Currency: DefaultCurrency}, nil
	}
	if err != nil {
		return Usage{}, fmt.Errorf("stop meter of %s: %w", allocationID, err)
	}
	// Then its workloads' running app meters, before anything is booked
	// (the ledger's chain locks the account): StopAppMeter takes a
	// meter, then the account, and so must this.
	if err := lockAppMeters(ctx, tx, allocationID); err != nil {
		return Usage{}, err
	}
	if stopped == nil {
		if _, err := tx.Exec(ctx, `UPDATE billing_meters SET stopped_at = greatest($2::timestamptz, started_at)
			WHERE allocation_id = $1`, allocationID, at); err != nil {
			return Usage{}, fmt.Errorf("stop meter of %s: %w", allocationID, err)
		}
		if err := tx.QueryRow(ctx, fmt.Sprintf(chargeSQL, `m.allocation_id = $3`), at, at, allocationID).Scan(
			new(int64), new(int64), new(int64)); err != nil {
			return Usage{}, fmt.Errorf("charge final window of %s: %w", allocationID, err)
		}
	}
	// Its workloads' app meters stop with it (appmeter.go): an app is
	// charged through its allocation, never beyond it.
	if err := stopAppMeters(ctx, tx, "allocation_id", allocationID, at, at); err != nil {
		return Usage{}, err
	}
	u, _, err := AllocationUsage(ctx, tx, allocationID)
	return u, err
}

// Usage is what an allocation has been charged.
type Usage struct {
	AllocationID string
	ProjectID    string
	SKU          string
	GPUs         int
	// PricePerGPUHourMinor is the price its meter started at.
	PricePerGPUHourMinor int64
	Currency             string
	StartedAt            time.Time
	StoppedAt            *time.Time // nil while it runs
	// Seconds is the active time charged so far (whole seconds).
	Seconds     int64
	AmountMinor int64
	Windows     []Window // filled by AllocationWindows only
}

// Window is one charged window of an allocation.
type Window struct {
	Start, End   time.Time
	Seconds      int64
	AmountMinor  int64
	StartSeconds int64
}

const usageSQL = `SELECT m.allocation_id, m.project_id, m.sku_id, m.gpus, m.price_per_gpu_hour_minor, m.currency,
	m.started_at, m.stopped_at, coalesce(max(u.end_seconds), 0)::bigint, coalesce(sum(u.amount_minor), 0)::bigint
	FROM billing_meters m LEFT JOIN usage_charges u ON u.allocation_id = m.allocation_id`

func scanUsage(r pgx.CollectableRow) (Usage, error) {
	var u Usage
	err := r.Scan(&u.AllocationID, &u.ProjectID, &u.SKU, &u.GPUs, &u.PricePerGPUHourMinor, &u.Currency,
		&u.StartedAt, &u.StoppedAt, &u.Seconds, &u.AmountMinor)
	u.StartedAt = u.StartedAt.UTC()
	if u.StoppedAt != nil {
		t := u.StoppedAt.UTC()
		u.StoppedAt = &t
	}
	return u, err
}

// AllocationUsage returns an allocation's usage; found is false when it
// never had a meter (it never became active).
func AllocationUsage(ctx context.Context, q Querier, allocationID string) (u Usage, found bool, err error) {
	rows, err := q.Query(ctx, usageSQL+` WHERE m.allocation_id = $1 GROUP BY m.allocation_id`, allocationID)
	if err != nil {
		return Usage{}, false, fmt.Errorf("usage of %s: %w", allocationID, err)
	}
	u, err = pgx.CollectExactlyOneRow(rows, scanUsage)
	if errors.Is(err, pgx.ErrNoRows) {
		return Usage{AllocationID: allocationID, Currency: DefaultCurrency}, false, nil
	}
	if err != nil {
		return Usage{}, false, fmt.Errorf("usage of %s: %w", allocationID, err)
	}
	return u, true, nil
}

// QueueAllocationUsage queues AllocationUsage's query in b (a read of
// several owners' tables in one round trip): *dst and *found are set when
// the batch's results are read.
func QueueAllocationUsage(b *pgx.Batch, dst *Usage, found *bool, allocationID string) {
	b.Queue(usageSQL+` WHERE m.allocation_id = $1 GROUP BY m.allocation_id`, allocationID).Query(func(rows pgx.Rows) error {
		u, err := pgx.CollectExactlyOneRow(rows, scanUsage)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			*dst, *found = Usage{AllocationID: allocationID, Currency: DefaultCurrency}, false
			return nil
		case err != nil:
			return fmt.Errorf("usage of %s: %w", allocationID, err)
		}
		*dst, *found = u, true
		return nil
	})
}

// ProjectUsage returns the usage of every metered allocation of a
// project, most recently started first (at most limit).
func ProjectUsage(ctx context.Context, q Querier, projectID string, limit int) ([]Usage, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	rows, err := q.Query(ctx, usageSQL+` WHERE m.project_id = $1 GROUP BY m.allocation_id
		ORDER BY m.started_at DESC, m.allocation_id LIMIT $2`, projectID, limit)
	if err != nil {
		return nil, fmt.Errorf("usage of project %s: %w", projectID, err)
	}
	us, err := pgx.CollectRows(rows, scanUsage)
	if err != nil {
		return nil, fmt.Errorf("usage of project %s: %w", projectID, err)
	}
	return us, nil
}

// AllocationWindows returns an allocation's usage with its charged
// windows, oldest first.
func AllocationWindows(ctx context.Context, q Querier, allocationID string) (Usage, bool, error) {
	u, found, err := AllocationUsage(ctx, q, allocationID)
	if err != nil || !found {
		return u, found, err
	}
	rows, err := q.Query(ctx, `SELECT window_start, window_end, end_seconds - start_seconds, amount_minor, start_seconds
		FROM usage_charges WHERE allocation_id = $1 ORDER BY window_start`, allocationID)
	if err != nil {
		return u, true, fmt.Errorf("windows of %s: %w", allocationID, err)
	}
	u.Windows, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Window, error) {
		var w Window
		err := r.Scan(&w.Start, &w.End, &w.Seconds, &w.AmountMinor, &w.StartSeconds)
		w.Start, w.End = w.Start.UTC(), w.End.UTC()
		return w, err
	})
	if err != nil {
		return u, true, fmt.Errorf("windows of %s: %w", allocationID, err)
	}
	return u, true, nil
}
