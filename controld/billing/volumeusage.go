package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// VolumeUsage is what a volume has been charged, over all its segments.
type VolumeUsage struct {
	VolumeID string
	// SizeBytes and PricePerGiBMonthMinor are its latest segment's.
	SizeBytes             int64
	PricePerGiBMonthMinor int64
	Currency              string
	StartedAt             time.Time  // its first segment's start
	StoppedAt             *time.Time // nil while it runs
	Running               bool
	// Seconds, GiBHours and AmountMinor are what its windows charged.
	Seconds     int64
	GiBHours    float64
	AmountMinor int64
	// Windows are its latest charged windows, oldest first.
	Windows []VolumeWindow
}

// VolumeWindow is one charged window of a volume, at the size of its
// segment.
type VolumeWindow struct {
	Start, End  time.Time
	Seconds     int64
	SizeBytes   int64
	GiBHours    float64
	AmountMinor int64
}

// volumeUsageSQL sums each volume's segments of project $1, latest
// started first; a segment's number is the meter id's suffix.
var volumeUsageSQL = `SELECT m.volume_id,
	(array_agg(m.size_bytes ORDER BY split_part(m.meter_id, '.', 2)::int DESC))[1],
	(array_agg(m.price_per_gib_month_minor ORDER BY split_part(m.meter_id, '.', 2)::int DESC))[1],
	min(m.currency), min(m.started_at), max(m.stopped_at), bool_or(m.stopped_at IS NULL),
	coalesce(sum(c.secs), 0)::bigint, coalesce(sum(c.secs * m.size_bytes) / 3865470566400.0, 0)::float8,
	coalesce(sum(c.amount), 0)::bigint
	FROM volume_meters m
	LEFT JOIN LATERAL (SELECT sum(c.end_seconds - c.start_seconds)::numeric AS secs, sum(c.amount_minor) AS amount
		FROM volume_charges c WHERE c.meter_id = m.meter_id) c ON true
	WHERE m.project_id = $1
	GROUP BY m.volume_id ORDER BY min(m.started_at) DESC, m.volume_id`

// volumeWindowsReadSQL is the latest $2 windows (all for $2 ≤ 0) of each
// volume of project $1.
const volumeWindowsReadSQL = `SELECT volume_id, window_start, window_end, seconds, size_bytes, amount_minor FROM (
	SELECT c.volume_id, c.window_start, c.window_end, c.end_seconds - c.start_seconds AS seconds, m.size_bytes, c.amount_minor,
		row_number() OVER (PARTITION BY c.volume_id ORDER BY c.window_start DESC) AS n
	FROM volume_charges c JOIN volume_meters m ON m.meter_id = c.meter_id
	WHERE c.project_id = $1) w
	WHERE $2 <= 0 OR n <= $2
	ORDER BY volume_id, window_start`

// gibHour is a GiB for an hour, in byte-seconds.
const gibHour = float64(1<<30) * 3600

// VolumeUsages returns what each volume of a project has been charged
// (latest started first), with its latest windows (at most windows of
// each; all for windows ≤ 0), in one snapshot when q is a repeatable-read
// transaction.
func VolumeUsages(ctx context.Context, q Querier, projectID string, windows int) ([]VolumeUsage, error) {
	rows, err := q.Query(ctx, volumeUsageSQL, projectID)
	if err != nil {
		return nil, fmt.Errorf("volume usage of %s: %w", projectID, err)
	}
	us, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (VolumeUsage, error) {
		var u VolumeUsage
		var stopped *time.Time
		err := r.Scan(&u.VolumeID, &u.SizeBytes, &u.PricePerGiBMonthMinor, &u.Currency, &u.StartedAt, &stopped,
			&u.Running, &u.Seconds, &u.GiBHours, &u.AmountMinor)
		u.StartedAt = u.StartedAt.UTC()
		if !u.Running && stopped != nil {
			t := stopped.UTC()
			u.StoppedAt = &t
		}
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("volume usage of %s: %w", projectID, err)
	}
	if len(us) == 0 {
		return us, nil
	}
	byID := make(map[string]*VolumeUsage, len(us))
	for i := range us {
		byID[us[i].VolumeID] = &us[i]
	}
	rows, err = q.Query(ctx, volumeWindowsReadSQL, projectID, windows)
	if err != nil {
		return nil, fmt.Errorf("volume windows of %s: %w", projectID, err)
	}
	var id string
	var w VolumeWindow
	_, err = pgx.ForEachRow(rows, []any{&id, &w.Start, &w.End, &w.Seconds, &w.SizeBytes, &w.AmountMinor}, func() error {
		w.Start, w.End = w.Start.UTC(), w.End.UTC()
		w.GiBHours = float64(w.SizeBytes) * float64(w.Seconds) / gibHour
		if u := byID[id]; u != nil {
			u.Windows = append(u.Windows, w)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("volume windows of %s: %w", projectID, err)
	}
	return us, nil
}
