package billing

import "time"

// SystemActor is the actor of the entries and changes billing makes by
// itself (usage windows, depletion releases).
const SystemActor = "system:billing"

// Rounding. An allocation's usage is charged in windows, each from where
// the last one ended to the window's end (or to the moment the meter
// stopped). Time is counted in whole seconds since the meter started,
// rounded down, and the cost of s seconds is
//
//	cost(s) = ⌊price_per_gpu_hour_minor × gpus × s / 3600⌋
//
// A window from s₀ to s₁ seconds is charged cost(s₁) − cost(s₀), never its
// own rounded amount, so the rounding never drifts: the windows of an
// allocation that was active for S seconds (rounded down) always add up to
// exactly cost(S), whatever the window length, however many retries. Any
// fraction of a minor unit is in the customer's favour, once, at the end.
// A window whose amount rounds to zero is recorded (in usage_charges) but
// books no ledger entry.
//
// windowsSQL records the due window of every meter matched by the WHERE
// clause (%s) up to $1 (or to when the meter stopped, if earlier), at
// time $2, in the CTE charged. Meters another transaction holds (a release
// stopping its meter, a second accrual) are skipped; (allocation_id,
// window_start) is unique, so a window two replicas both compute is
// charged once. Each meter's last window is read from the primary key
// alone (it includes window_end and end_seconds).
const windowsSQL = `WITH due AS (
	SELECT m.allocation_id, m.project_id, m.sku_id, m.gpus, m.price_per_gpu_hour_minor AS price, m.currency, m.started_at,
		coalesce(l.window_end, m.started_at) AS from_t, coalesce(l.end_seconds, 0) AS from_s,
		CASE WHEN m.stopped_at IS NOT NULL AND m.stopped_at < $1 THEN m.stopped_at ELSE $1::timestamptz END AS to_t
	FROM billing_meters m
	LEFT JOIN LATERAL (SELECT u.window_end, u.end_seconds FROM usage_charges u
		WHERE u.allocation_id = m.allocation_id ORDER BY u.window_start DESC LIMIT 1) l ON true
	WHERE %s
	FOR UPDATE OF m SKIP LOCKED
), win AS (
	SELECT *, floor(extract(epoch FROM to_t - started_at))::bigint AS to_s FROM due WHERE to_t > from_t
), charged AS (
	INSERT INTO usage_charges (allocation_id, project_id, currency, window_start, window_end, start_seconds, end_seconds,
		amount_minor, created_at)
	SELECT allocation_id, project_id, currency, from_t, to_t, from_s, to_s,
		price * gpus * to_s / 3600 - price * gpus * from_s / 3600, $2
	FROM win
	-- Sorting reads every due window before the first insert (the lookups
	-- never scan rows this statement inserted) and inserts in key order.
	ORDER BY allocation_id
	ON CONFLICT (allocation_id, window_start) DO NOTHING
	RETURNING allocation_id, project_id, currency, window_start, start_seconds, end_seconds, amount_minor
)`

// usageReference and usageMemo are the reference and memo of the ledger
// entry of a window in charged.
const (
	usageReference = `'usage:' || allocation_id || ':' || to_char(window_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`
	usageMemo      = `format('%%s: %%s s of usage (%%s–%%s s)', allocation_id, end_seconds - start_seconds, start_seconds, end_seconds)`
)

// chargeSQL charges the windows of windowsSQL and books their ledger
// entries in the same statement, each chained by the ledger_entries_chain
// row trigger. It reports the windows charged, the ledger entries booked
// and their total. StopMeter charges a meter's last window with it; the
// accrual of every meter books its entries itself (accrueBatch).
const chargeSQL = windowsSQL + `, booked AS (
	-- Everything comes from charged's RETURNING: joining it back to win
	-- would be a join the planner cannot estimate (a nested loop over
	-- 100,000 × 100,000 rows in the benchmark).
	INSERT INTO ledger_entries (project_id, seq, kind, reference, amount_minor, currency, memo, actor_id, created_at, prev_hash, hash)
	SELECT project_id, 0, 'usage', ` + usageReference + `, -amount_minor, currency, ` + usageMemo + `,
		'` + SystemActor + `', $2, '', ''
	FROM charged
	WHERE amount_minor > 0
	ORDER BY project_id, allocation_id
	RETURNING amount_minor
)
SELECT (SELECT count(*) FROM charged), (SELECT count(*) FROM booked), (SELECT coalesce(sum(-amount_minor), 0)::bigint FROM booked)`

// AccrualResult is what one accrual charged.
type AccrualResult struct {
	Windows     int64 // usage windows recorded
	Entries     int64 // ledger entries booked (windows that cost something)
	AmountMinor int64 // total charged
}

// WindowEnd is the end of the last complete accrual window at now:
// windows are aligned to multiples of window since the Unix epoch.
func WindowEnd(now time.Time, window time.Duration) time.Time {
	return now.Truncate(window).UTC()
}
