package billing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// KindApp books an app's own charge for a workload's window; amount < 0.
const KindApp Kind = "app"

// App meters (docs/apps.md, "Prices"; docs/decisions/0059-app-prices.md).
// A workload of an app with a price of its own is charged that price per
// hour for its running time, on top of its allocation's charge, in the
// same accrual windows and with the same rounding (accrual.go): s whole
// seconds since it started cost ⌊price_per_hour_minor × s / 3600⌋ and a
// window from s₀ to s₁ is charged cost(s₁) − cost(s₀), once per
// (workload, window_start). Its allocation's release stops it
// (StopMeter): it is charged through its allocation, never beyond it.

// AppMeter is what StartAppMeter needs of a workload: who pays, the
// allocation it runs on, and the app's price when it was run.
type AppMeter struct {
	WorkloadID        string
	AllocationID      string
	ProjectID         string
	UserID            string // who ran it: their budget counts it
	AppID             string
	PricePerHourMinor int64
	Currency          string
}

// StartAppMeter starts charging a workload of a priced app from at (when
// it started running). controld/workloads calls it, with the workload's
// row locked, when it first reports a start time; a workload that has a
// meter keeps it, and one whose allocation's meter is not running (never
// active, or released) gets none. The allocation's meter row is locked
// FOR SHARE: a release (StopMeter, which holds it FOR UPDATE) in flight is
// waited for and its stop seen, so no meter starts on a released
// allocation that the release's stopAppMeters could not see. Once the
// workload has a meter (every settle after its first running one) no row
// is selected, so none is locked: a status does not lock the allocation's
// meter, which the accrual would then skip.
func StartAppMeter(ctx context.Context, tx pgx.Tx, m AppMeter, at time.Time) error {
	if m.PricePerHourMinor <= 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO app_meters (workload_id, allocation_id, project_id, user_id, app_id,
			price_per_hour_minor, currency, started_at)
		SELECT $1, $2, $3, $4, $5, $6, $7, greatest($8::timestamptz, b.started_at)
		FROM billing_meters b WHERE b.allocation_id = $2 AND b.stopped_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM app_meters WHERE workload_id = $1)
		FOR SHARE OF b
		ON CONFLICT (workload_id) DO NOTHING`,
		m.WorkloadID, m.AllocationID, m.ProjectID, m.UserID, m.AppID, m.PricePerHourMinor, m.Currency, at)
	if err != nil {
		return fmt.Errorf("start app meter of %s: %w", m.WorkloadID, err)
	}
	return nil
}

// StopAppMeter stops a workload's running app meter at `at` (its end)
// and charges its final, partial window, dated now, in tx; a workload
// without one is left alone.
func StopAppMeter(ctx context.Context, tx pgx.Tx, workloadID string, at, now time.Time) error {
	// As StopMeter: the lock makes a concurrent accrual skip the meter,
	// or waits for the accrual that holds it.
	err := tx.QueryRow(ctx, `SELECT workload_id FROM app_meters WHERE workload_id = $1 AND stopped_at IS NULL
		FOR UPDATE`, workloadID).Scan(new(string))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stop app meter of %s: %w", workloadID, err)
	}
	return stopAppMeters(ctx, tx, "workload_id", workloadID, at, now)
}

// stopAppMeters stops the running app meters whose column col (the
// workload's or the allocation's id) is id at `at` and charges their
// final windows, dated now (a charge is booked when it is made: an end
// reported late must not fall in an earlier budget period).
func stopAppMeters(ctx context.Context, tx pgx.Tx, col, id string, at, now time.Time) error {
	if _, err := tx.Exec(ctx, `UPDATE app_meters SET stopped_at = greatest($1::timestamptz, started_at)
		WHERE stopped_at IS NULL AND `+col+` = $2`, at, id); err != nil {
		return fmt.Errorf("stop app meters of %s: %w", id, err)
	}
	if err := tx.QueryRow(ctx, fmt.Sprintf(appChargeSQL, `m.`+col+` = $3 AND m.stopped_at = greatest($1::timestamptz, m.started_at)`),
		at, now, id).Scan(new(int64), new(int64), new(int64)); err != nil {
		return fmt.Errorf("charge final app windows of %s: %w", id, err)
	}
	return nil
}

// lockAppMeters locks the running app meters of an allocation, in
// workload order (StopMeter, before it books anything): the order
// StopAppMeter takes them in, meter then account, so a release and a
// workload's end never wait on each other in a cycle.
func lockAppMeters(ctx context.Context, tx pgx.Tx, allocationID string) error {
	rows, err := tx.Query(ctx, `SELECT workload_id FROM app_meters WHERE allocation_id = $1 AND stopped_at IS NULL
		ORDER BY workload_id FOR UPDATE`, allocationID)
	if err != nil {
		return fmt.Errorf("lock app meters of %s: %w", allocationID, err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("lock app meters of %s: %w", allocationID, err)
	}
	return nil
}

// appWindowsSQL is windowsSQL for app meters: it records the due window
// of every meter the WHERE clause (%s) matches up to $1 (or to when it
// stopped), at $2, in the CTE charged. Locked meters are skipped;
// (workload_id, window_start) is unique, so a window is charged once.
var appWindowsSQL = `WITH due AS (
	SELECT m.workload_id, m.allocation_id, m.project_id, m.price_per_hour_minor AS price, m.currency, m.started_at,
		coalesce(l.window_end, m.started_at) AS from_t, coalesce(l.end_seconds, 0) AS from_s,
		CASE WHEN m.stopped_at IS NOT NULL AND m.stopped_at < $1 THEN m.stopped_at ELSE $1::timestamptz END AS to_t
	FROM app_meters m
	LEFT JOIN LATERAL (SELECT c.window_end, c.end_seconds FROM app_charges c
		WHERE c.workload_id = m.workload_id ORDER BY c.window_start DESC LIMIT 1) l ON true
	WHERE %s
	FOR UPDATE OF m SKIP LOCKED
), win AS (
	SELECT *, floor(extract(epoch FROM to_t - started_at))::bigint AS to_s FROM due WHERE to_t > from_t
), charged AS (
	INSERT INTO app_charges (workload_id, allocation_id, project_id, currency, window_start, window_end, start_seconds,
		end_seconds, amount_minor, created_at)
	SELECT workload_id, allocation_id, project_id, currency, from_t, to_t, from_s, to_s,
		price * to_s / 3600 - price * from_s / 3600, $2
	FROM win
	ORDER BY workload_id
	ON CONFLICT (workload_id, window_start) DO NOTHING
	RETURNING workload_id, allocation_id, project_id, currency, window_start, start_seconds, end_seconds, amount_minor
)`

// appReference and appMemo are the reference and memo of the ledger
// entry of a window in appWindowsSQL's charged.
const (
	appReference = `'app:' || workload_id || ':' || to_char(window_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`
	appMemo      = `format('%%s: %%s s of app on %%s (%%s–%%s s)', workload_id, end_seconds - start_seconds, allocation_id, start_seconds, end_seconds)`
)

// appChargeSQL charges the windows of appWindowsSQL and books their
// entries, chained by the row trigger (a meter's final window).
var appChargeSQL = appWindowsSQL + `, booked AS (
	INSERT INTO ledger_entries (project_id, seq, kind, reference, amount_minor, currency, memo, actor_id, created_at, prev_hash, hash)
	SELECT project_id, 0, 'app', ` + appReference + `, -amount_minor, currency, ` + appMemo + `,
		'` + SystemActor + `', $2, '', ''
	FROM charged
	WHERE amount_minor > 0
	ORDER BY project_id, workload_id
	RETURNING amount_minor
)
SELECT (SELECT count(*) FROM charged), (SELECT count(*) FROM booked), (SELECT coalesce(sum(-amount_minor), 0)::bigint FROM booked)`

// accrueAppsSQL records the due windows of the running app meters of the
// projects $3 and returns, in booking order, each window with the
// reference and memo of its ledger entry.
var accrueAppsSQL = fmt.Sprintf(appWindowsSQL, `m.stopped_at IS NULL AND m.project_id = ANY($3)`) + `
SELECT project_id, amount_minor, currency, ` + fmt.Sprintf(appReference+`, `+appMemo) + `
FROM charged ORDER BY project_id, workload_id`

// appendAppEntries records the due windows of the running app meters of
// projects (accrueBatch, under the accounts' locks, after the volumes')
// and appends the ledger entries of those that cost something.
func appendAppEntries(ctx context.Context, tx pgx.Tx, entries []Entry, r *AccrualResult, projects []string,
	upTo, now time.Time) ([]Entry, error) {
	rows, err := tx.Query(ctx, accrueAppsSQL, upTo, now, projects)
	if err != nil {
		return entries, fmt.Errorf("accrue apps: %w", err)
	}
	var e Entry
	var amount int64
	_, err = pgx.ForEachRow(rows, []any{&e.ProjectID, &amount, &e.Currency, &e.Reference, &e.Memo}, func() error {
		r.Windows++
		if amount > 0 {
			e.Kind, e.AmountMinor, e.ActorID, e.CreatedAt = KindApp, -amount, SystemActor, now
			entries = append(entries, e)
		}
		return nil
	})
	if err != nil {
		return entries, fmt.Errorf("accrue apps: %w", err)
	}
	return entries, nil
}

// appSpendSQL adds to spendSQL's columns the app charges of the same
// scope: charged since $3, accrued by the running app meters since their
// last window at $4, and their burn per hour.
const appSpendSQL = `,
	coalesce((SELECT sum(c.amount_minor) FROM app_charges c
		WHERE c.project_id = $1 AND c.created_at >= $3
		  AND ($2 = '' OR c.workload_id IN (SELECT m.workload_id FROM app_meters m
			WHERE m.project_id = $1 AND m.user_id = $2))), 0)::bigint,
	coalesce((SELECT sum(greatest(0, m.price_per_hour_minor *
			greatest(0, floor(extract(epoch FROM $4::timestamptz - m.started_at))::bigint) / 3600
			- m.price_per_hour_minor * coalesce(l.end_seconds, 0) / 3600))
		FROM app_meters m
		LEFT JOIN LATERAL (SELECT c.end_seconds FROM app_charges c WHERE c.workload_id = m.workload_id
			ORDER BY c.window_start DESC LIMIT 1) l ON true
		WHERE m.project_id = $1 AND m.stopped_at IS NULL AND ($2 = '' OR m.user_id = $2)), 0)::bigint,
	coalesce((SELECT sum(m.price_per_hour_minor) FROM app_meters m
		WHERE m.project_id = $1 AND m.stopped_at IS NULL AND ($2 = '' OR m.user_id = $2)), 0)::bigint`

// appBurnSQL is what the running app meters of project $1 cost per hour.
const appBurnSQL = `(SELECT coalesce(sum(m.price_per_hour_minor), 0)::bigint
	FROM app_meters m WHERE m.project_id = $1 AND m.stopped_at IS NULL)`

// AppCharge is what a workload's app meter has charged.
type AppCharge struct {
	PricePerHourMinor int64
	Currency          string
	Seconds           int64 // charged running time
	AmountMinor       int64
}

// AppCharges returns what the app meters of workloads charged, by
// workload id (a workload without a meter is missing).
func AppCharges(ctx context.Context, q Querier, workloadIDs []string) (map[string]AppCharge, error) {
	rows, err := q.Query(ctx, `SELECT m.workload_id, m.price_per_hour_minor, m.currency,
			coalesce(max(c.end_seconds), 0)::bigint, coalesce(sum(c.amount_minor), 0)::bigint
		FROM app_meters m LEFT JOIN app_charges c ON c.workload_id = m.workload_id
		WHERE m.workload_id = ANY($1) GROUP BY m.workload_id`, workloadIDs)
	if err != nil {
		return nil, fmt.Errorf("app charges: %w", err)
	}
	out := map[string]AppCharge{}
	var id string
	var c AppCharge
	_, err = pgx.ForEachRow(rows, []any{&id, &c.PricePerHourMinor, &c.Currency, &c.Seconds, &c.AmountMinor}, func() error {
		out[id] = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("app charges: %w", err)
	}
	return out, nil
}
