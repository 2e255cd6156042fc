package billing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// KindStorage books a volume's storage window; amount < 0.
const KindStorage Kind = "storage"

// Volume rounding (docs/decisions/0024-volume-meters.md). A volume is
// charged by the GiB-hour of its provisioned size at a price per GiB per
// month of 730 hours. A segment of s whole seconds at size b bytes costs
//
//	cost(s) = ⌊price_per_gib_month_minor × b × s / (2³⁰ × 730 × 3600)⌋
//
// and a window from s₀ to s₁ is charged cost(s₁) − cost(s₀), as
// allocations are (windowsSQL), so the windows of a segment add up to
// its cost rounded down once. The product is numeric in SQL: a 16 TiB
// volume for a year overflows bigint.
const gibMonthSeconds = 1 << 30 * 730 * 3600

// volumeCost is the SQL of cost(s) for a segment of size bytes at price
// (SQL expressions).
func volumeCost(price, size, seconds string) string {
	return fmt.Sprintf(`floor(%s::numeric * %s * %s / %d)::bigint`, price, size, seconds, gibMonthSeconds)
}

// VolumeMeter is what StartVolumeMeter needs of a volume: who pays, its
// size and the price per GiB-month it is charged at.
type VolumeMeter struct {
	VolumeID              string
	ProjectID             string
	UserID                string // who created it: their budget counts it
	SizeBytes             int64
	PricePerGiBMonthMinor int64
	Currency              string
}

// StartVolumeMeter starts charging a volume at its size from at: a new
// segment "<volume id>.<n>". controld/volumes calls it, with the volume's
// row locked, when the volume becomes ready and when a resize is done
// (after StopVolumeMeter). A volume with a running segment keeps it.
func StartVolumeMeter(ctx context.Context, tx pgx.Tx, m VolumeMeter, at time.Time) error {
	_, err := tx.Exec(ctx, `INSERT INTO volume_meters (meter_id, volume_id, project_id, user_id, size_bytes,
			price_per_gib_month_minor, currency, started_at)
		SELECT $1 || '.' || (count(*) + 1), $1, $2, $3, $4, $5, $6, $7 FROM volume_meters WHERE volume_id = $1
		ON CONFLICT (volume_id) WHERE stopped_at IS NULL DO NOTHING`,
		m.VolumeID, m.ProjectID, m.UserID, m.SizeBytes, m.PricePerGiBMonthMinor, m.Currency, at)
	if err != nil {
		return fmt.Errorf("start meter of volume %s: %w", m.VolumeID, err)
	}
	return nil
}

// StopVolumeMeter stops a volume's running segment at `at` and charges
// its final, partial window, in tx; a volume without one (never ready,
// or stopped already) is left alone. It reports whether it stopped one.
func StopVolumeMeter(ctx context.Context, tx pgx.Tx, volumeID string, at time.Time) (bool, error) {
	// As StopMeter: locking the segment makes a concurrent accrual skip
	// it, or waits for the accrual that holds it, so that the final window
	// starts where the accrual's ended.
	var meterID string
	err := tx.QueryRow(ctx, `SELECT meter_id FROM volume_meters WHERE volume_id = $1 AND stopped_at IS NULL
		FOR UPDATE`, volumeID).Scan(&meterID)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stop meter of volume %s: %w", volumeID, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE volume_meters SET stopped_at = greatest($2::timestamptz, started_at)
		WHERE meter_id = $1`, meterID, at); err != nil {
		return false, fmt.Errorf("stop meter of volume %s: %w", volumeID, err)
	}
	if err := tx.QueryRow(ctx, fmt.Sprintf(volumeChargeSQL, `m.meter_id = $3`), at, at, meterID).Scan(
		new(int64), new(int64), new(int64)); err != nil {
		return false, fmt.Errorf("charge final window of volume %s: %w", volumeID, err)
	}
	return true, nil
}

// volumeWindowsSQL is windowsSQL for volume segments: it records the due
// window of every segment the WHERE clause (%s) matches up to $1 (or to
// when it stopped), at $2, in the CTE charged. Locked segments are
// skipped; (meter_id, window_start) is unique; the last window is read
// from the primary key alone.
var volumeWindowsSQL = `WITH due AS (
	SELECT m.meter_id, m.volume_id, m.project_id, m.size_bytes, m.price_per_gib_month_minor AS price, m.currency, m.started_at,
		coalesce(l.window_end, m.started_at) AS from_t, coalesce(l.end_seconds, 0) AS from_s,
		CASE WHEN m.stopped_at IS NOT NULL AND m.stopped_at < $1 THEN m.stopped_at ELSE $1::timestamptz END AS to_t
	FROM volume_meters m
	LEFT JOIN LATERAL (SELECT c.window_end, c.end_seconds FROM volume_charges c
		WHERE c.meter_id = m.meter_id ORDER BY c.window_start DESC LIMIT 1) l ON true
	WHERE %s
	FOR UPDATE OF m SKIP LOCKED
), win AS (
	SELECT *, floor(extract(epoch FROM to_t - started_at))::bigint AS to_s FROM due WHERE to_t > from_t
), charged AS (
	INSERT INTO volume_charges (meter_id, volume_id, project_id, currency, window_start, window_end, start_seconds,
		end_seconds, amount_minor, created_at)
	SELECT meter_id, volume_id, project_id, currency, from_t, to_t, from_s, to_s,
		` + volumeCost("price", "size_bytes", "to_s") + ` - ` + volumeCost("price", "size_bytes", "from_s") + `, $2
	FROM win
	ORDER BY meter_id
	ON CONFLICT (meter_id, window_start) DO NOTHING
	RETURNING meter_id, volume_id, project_id, currency, window_start, start_seconds, end_seconds, amount_minor
)`

// storageReference and storageMemo are the reference and memo of the
// ledger entry of a window in volumeWindowsSQL's charged: the reference
// names the segment and the window, the memo the volume.
const (
	storageReference = `'storage:' || meter_id || ':' || to_char(window_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`
	storageMemo      = `format('%%s: %%s s of storage (%%s–%%s s of segment %%s)', volume_id, end_seconds - start_seconds, start_seconds, end_seconds, meter_id)`
)

// volumeChargeSQL charges the windows of volumeWindowsSQL and books their
// entries, chained by the row trigger (StopVolumeMeter's final window).
var volumeChargeSQL = volumeWindowsSQL + `, booked AS (
	INSERT INTO ledger_entries (project_id, seq, kind, reference, amount_minor, currency, memo, actor_id, created_at, prev_hash, hash)
	SELECT project_id, 0, 'storage', ` + storageReference + `, -amount_minor, currency, ` + storageMemo + `,
		'` + SystemActor + `', $2, '', ''
	FROM charged
	WHERE amount_minor > 0
	ORDER BY project_id, meter_id
	RETURNING amount_minor
)
SELECT (SELECT count(*) FROM charged), (SELECT count(*) FROM booked), (SELECT coalesce(sum(-amount_minor), 0)::bigint FROM booked)`

// accrueVolumesSQL records the due windows of the running segments of
// the projects $3 and returns, in booking order, each window with the
// reference and memo of its ledger entry.
var accrueVolumesSQL = fmt.Sprintf(volumeWindowsSQL, `m.stopped_at IS NULL AND m.project_id = ANY($3)`) + `
SELECT project_id, amount_minor, currency, ` + fmt.Sprintf(storageReference+`, `+storageMemo) + `
FROM charged ORDER BY project_id, meter_id`

// appendVolumeEntries records the due windows of the running volume
// segments of projects (accrueBatch, under the accounts' locks, after the
// allocations' windows: the same lock order) and appends the ledger
// entries of those that cost something to entries.
func appendVolumeEntries(ctx context.Context, tx pgx.Tx, entries []Entry, r *AccrualResult, projects []string,
	upTo, now time.Time) ([]Entry, error) {
	rows, err := tx.Query(ctx, accrueVolumesSQL, upTo, now, projects)
	if err != nil {
		return entries, fmt.Errorf("accrue storage: %w", err)
	}
	var e Entry
	var amount int64
	_, err = pgx.ForEachRow(rows, []any{&e.ProjectID, &amount, &e.Currency, &e.Reference, &e.Memo}, func() error {
		r.Windows++
		if amount > 0 {
			e.Kind, e.AmountMinor, e.ActorID, e.CreatedAt = KindStorage, -amount, SystemActor, now
			entries = append(entries, e)
		}
		return nil
	})
	if err != nil {
		return entries, fmt.Errorf("accrue storage: %w", err)
	}
	return entries, nil
}

// storageSpendSQL adds to spendSQL's columns the storage of the same
// scope: charged since $3, accrued by the running segments since their
// last window at $4 (the accrual's rounding), and their burn per hour.
var storageSpendSQL = `,
	coalesce((SELECT sum(c.amount_minor) FROM volume_charges c
		WHERE c.project_id = $1 AND c.created_at >= $3
		  AND ($2 = '' OR c.meter_id IN (SELECT m.meter_id FROM volume_meters m
			WHERE m.project_id = $1 AND m.user_id = $2))), 0)::bigint,
	coalesce((SELECT sum(greatest(0, ` +
	volumeCost("m.price_per_gib_month_minor", "m.size_bytes",
		"greatest(0, floor(extract(epoch FROM $4::timestamptz - m.started_at))::bigint)") + ` - ` +
	volumeCost("m.price_per_gib_month_minor", "m.size_bytes", "coalesce(l.end_seconds, 0)") + `))
		FROM volume_meters m
		LEFT JOIN LATERAL (SELECT c.end_seconds FROM volume_charges c WHERE c.meter_id = m.meter_id
			ORDER BY c.window_start DESC LIMIT 1) l ON true
		WHERE m.project_id = $1 AND m.stopped_at IS NULL AND ($2 = '' OR m.user_id = $2)), 0)::bigint,
	` + fmt.Sprintf(`(SELECT coalesce(floor(sum(m.price_per_gib_month_minor::numeric * m.size_bytes) * 3600 / %d), 0)::bigint
		FROM volume_meters m WHERE m.project_id = $1 AND m.stopped_at IS NULL AND ($2 = '' OR m.user_id = $2))`, gibMonthSeconds)

// storageBurnSQL is what the running volume segments of project $1 cost
// per hour, rounded down once for all of them.
var storageBurnSQL = fmt.Sprintf(`(SELECT coalesce(floor(sum(m.price_per_gib_month_minor::numeric * m.size_bytes) * 3600 / %d), 0)::bigint
	FROM volume_meters m WHERE m.project_id = $1 AND m.stopped_at IS NULL)`, gibMonthSeconds)
