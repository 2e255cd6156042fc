package billing

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Account is a project account's state, for `gpuaas billing balance`.
type Account struct {
	ProjectID    string
	BalanceMinor int64 // the sum of the entries
	Currency     string
	// LowBalanceThresholdMinor is the account's own threshold, or the
	// default when it has none.
	LowBalanceThresholdMinor int64
	LowBalance               bool
	DepletedAt               *time.Time
	// BurnRateMinorPerHour is what the running meters cost per hour: the
	// allocations', the volumes' (StorageBurnMinorPerHour, rounded down
	// once for all the volumes) and the running workloads' apps' own
	// prices (AppBurnMinorPerHour, appmeter.go).
	BurnRateMinorPerHour    int64
	StorageBurnMinorPerHour int64
	AppBurnMinorPerHour     int64
	RunningMeters           int // allocations
	RunningVolumes          int
}

// AccountOf reads a project's account; a project that never had an entry
// has an empty one.
func AccountOf(ctx context.Context, q Querier, projectID string, defaultThreshold int64) (Account, error) {
	return scanAccount(q.QueryRow(ctx, accountSQL, projectID), projectID, defaultThreshold)
}

// QueueAccountOf queues AccountOf's read in b, for a caller that sends
// it with other statements in one round trip; *dst is set when the
// batch's results are read.
func QueueAccountOf(b *pgx.Batch, dst *Account, projectID string, defaultThreshold int64) {
	b.Queue(accountSQL, projectID).Fn = func(br pgx.BatchResults) error {
		a, err := scanAccount(br.QueryRow(), projectID, defaultThreshold)
		*dst = a
		return err
	}
}

// QueueAccountCheck queues, in b, AccountOf's read with more columns
// computed from it in the same statement (one snapshot): sql is a
// statement reading "FROM (ACCOUNT) a" where ACCOUNT is replaced by
// AccountOf's read of project $1, whose columns are named balance,
// currency, threshold, depleted_at, meters_burn, meters, storage_burn,
// volumes, app_burn; a's columns come first, then the caller's, which
// extra receives. alloc's funds check uses it to decide the check in
// the database (docs/decisions/0067-create-lock-order.md).
func QueueAccountCheck(b *pgx.Batch, dst *Account, sql string, args []any, extra []any, then func() error) {
	sql = strings.Replace(sql, "(ACCOUNT) a", "("+accountSQL+") a(balance, currency, threshold, depleted_at, "+
		"meters_burn, meters, storage_burn, volumes, app_burn)", 1)
	projectID, _ := args[0].(string)
	b.Queue(sql, args...).Fn = func(br pgx.BatchResults) error {
		a, err := scanAccount(withExtra{br.QueryRow(), extra}, projectID, 0)
		*dst = a
		if err != nil {
			return err
		}
		return then()
	}
}

// withExtra scans a row's columns beyond the account's into extra.
type withExtra struct {
	row   pgx.Row
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.row.Scan(append(dest, w.extra...)...) }

var accountSQL = `SELECT coalesce((SELECT sum(amount_minor) FROM ledger_entries WHERE project_id = $1), 0)::bigint,
		coalesce(a.currency, 'usd'), a.low_balance_threshold_minor, a.depleted_at,
		(SELECT coalesce(sum(m.price_per_gpu_hour_minor * m.gpus), 0)::bigint FROM billing_meters m
			WHERE m.project_id = $1 AND m.stopped_at IS NULL),
		(SELECT count(*) FROM billing_meters m WHERE m.project_id = $1 AND m.stopped_at IS NULL),
		` + storageBurnSQL + `,
		(SELECT count(*) FROM volume_meters m WHERE m.project_id = $1 AND m.stopped_at IS NULL),
		` + appBurnSQL + `
		FROM (SELECT 1) one LEFT JOIN billing_accounts a ON a.project_id = $1`

func scanAccount(row pgx.Row, projectID string, defaultThreshold int64) (Account, error) {
	a := Account{ProjectID: projectID, Currency: DefaultCurrency, LowBalanceThresholdMinor: defaultThreshold}
	var threshold *int64
	err := row.Scan(&a.BalanceMinor, &a.Currency, &threshold, &a.DepletedAt, &a.BurnRateMinorPerHour, &a.RunningMeters,
		&a.StorageBurnMinorPerHour, &a.RunningVolumes, &a.AppBurnMinorPerHour)
	if err != nil {
		return a, fmt.Errorf("account of %s: %w", projectID, err)
	}
	a.BurnRateMinorPerHour += a.StorageBurnMinorPerHour + a.AppBurnMinorPerHour
	if threshold != nil {
		a.LowBalanceThresholdMinor = *threshold
	}
	a.LowBalance = a.BalanceMinor < a.LowBalanceThresholdMinor
	if a.DepletedAt != nil {
		t := a.DepletedAt.UTC()
		a.DepletedAt = &t
	}
	return a, nil
}

// SetLowBalanceThreshold sets a project's own low-balance threshold
// (minor units, ≥ 0); nil goes back to the default.
func SetLowBalanceThreshold(ctx context.Context, q Querier, projectID string, minor *int64, now time.Time) error {
	if minor != nil && *minor < 0 {
		return fmt.Errorf("%w: threshold %d is negative", ErrInvalidEntry, *minor)
	}
	_, err := q.Exec(ctx, `INSERT INTO billing_accounts (project_id, low_balance_threshold_minor, created_at)
		VALUES ($1, $2, $3)
		ON CONFLICT (project_id) DO UPDATE SET low_balance_threshold_minor = excluded.low_balance_threshold_minor`,
		projectID, minor, now)
	if err != nil {
		return fmt.Errorf("set low-balance threshold of %s: %w", projectID, err)
	}
	return nil
}
