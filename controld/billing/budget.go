package billing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Budget is a spend cap per UTC calendar period and/or an hourly burn cap,
// of a project (UserID "") or of one user in it, with where its scope
// stands when it was read.
type Budget struct {
	ProjectID string
	UserID    string
	// Period and AmountMinor are the spend cap ("" and 0: none).
	Period              string
	AmountMinor         int64
	BurnCapMinorPerHour int64
	Action              string
	Currency            string
	UpdatedAt           time.Time
	// PeriodStart and PeriodEnd bound the period that was current when the
	// budget was read (zero without a spend cap).
	PeriodStart, PeriodEnd time.Time
	// SpentMinor is the scope's usage charged since PeriodStart plus what
	// its running meters accrued since their last charge; BurnMinorPerHour
	// what its running meters cost per hour.
	SpentMinor       int64
	BurnMinorPerHour int64

	warnedPeriod, cappedPeriod *time.Time
}

// Percent is SpentMinor of AmountMinor (0 without a spend cap).
func (b Budget) Percent() float64 {
	if b.AmountMinor <= 0 {
		return 0
	}
	return float64(b.SpentMinor) * 100 / float64(b.AmountMinor)
}

// CheckBudget validates a budget to be set: a spend cap (a known period
// and an amount above zero) and/or a burn cap above zero, and a known
// action. Errors are invalid_argument.
func CheckBudget(b Budget) error {
	switch {
	case b.AmountMinor < 0 || b.BurnCapMinorPerHour < 0:
		return api.Errorf(api.CodeInvalidArgument, "budget amounts must not be negative")
	case b.AmountMinor > 0 && !api.ValidBudgetPeriod(b.Period):
		return api.Errorf(api.CodeInvalidArgument, "budget period %q is not day, week or month", b.Period)
	case b.AmountMinor == 0 && b.Period != "":
		return api.Errorf(api.CodeInvalidArgument, "a budget period needs an amount above zero").
			WithHint("to remove a budget, use `gpuaas billing budget clear`")
	case b.AmountMinor == 0 && b.BurnCapMinorPerHour == 0:
		return api.Errorf(api.CodeInvalidArgument, "a budget needs a spend cap (--period and --amount) or a burn cap (--burn-cap)")
	case b.Action != api.BudgetRefuse && b.Action != api.BudgetRelease:
		return api.Errorf(api.CodeInvalidArgument, "budget action %q is not refuse or release", b.Action)
	}
	return nil
}

// SetBudget creates or replaces the budget of b's scope, in tx, and
// returns it as stored. A replaced budget keeps its warning state only
// while its spend cap is unchanged.
func SetBudget(ctx context.Context, tx pgx.Tx, b Budget, actor string, now time.Time) (Budget, error) {
	if b.Action == "" {
		b.Action = api.BudgetRefuse
	}
	if b.Currency == "" {
		b.Currency = DefaultCurrency
	}
	if err := CheckBudget(b); err != nil {
		return Budget{}, err
	}
	_, err := tx.Exec(ctx, `INSERT INTO budgets (project_id, user_id, period, amount_minor, burn_cap_minor_per_hour,
			action, currency, created_at, updated_at, updated_by)
		VALUES ($1, $2, nullif($3, ''), nullif($4, 0), nullif($5, 0), $6, $7, $8, $8, $9)
		ON CONFLICT (project_id, user_id) DO UPDATE SET period = excluded.period, amount_minor = excluded.amount_minor,
			burn_cap_minor_per_hour = excluded.burn_cap_minor_per_hour, action = excluded.action,
			updated_at = excluded.updated_at, updated_by = excluded.updated_by,
			warned_period = CASE WHEN budgets.period IS NOT DISTINCT FROM excluded.period
				AND budgets.amount_minor IS NOT DISTINCT FROM excluded.amount_minor THEN budgets.warned_period END,
			capped_period = CASE WHEN budgets.period IS NOT DISTINCT FROM excluded.period
				AND budgets.amount_minor IS NOT DISTINCT FROM excluded.amount_minor THEN budgets.capped_period END`,
		b.ProjectID, b.UserID, b.Period, b.AmountMinor, b.BurnCapMinorPerHour, b.Action, b.Currency, now, actor)
	if err != nil {
		return Budget{}, fmt.Errorf("set budget of %s: %w", b.ProjectID, err)
	}
	bs, err := readBudgets(ctx, tx, `WHERE b.project_id = $1 AND b.user_id = $2`, now, b.ProjectID, b.UserID)
	if err != nil {
		return Budget{}, err
	}
	return bs[0], nil
}

// ClearBudget removes the budget of a scope, in tx, and returns what it
// was; not_found when there is none.
func ClearBudget(ctx context.Context, tx pgx.Tx, projectID, userID string, now time.Time) (Budget, error) {
	bs, err := readBudgets(ctx, tx, `WHERE b.project_id = $1 AND b.user_id = $2 FOR UPDATE`, now, projectID, userID)
	if err != nil {
		return Budget{}, err
	}
	if len(bs) == 0 {
		return Budget{}, api.Errorf(api.CodeNotFound, "no budget to clear")
	}
	if _, err := tx.Exec(ctx, `DELETE FROM budgets WHERE project_id = $1 AND user_id = $2`, projectID, userID); err != nil {
		return Budget{}, fmt.Errorf("clear budget of %s: %w", projectID, err)
	}
	return bs[0], nil
}

// ClearBudgetPeriod removes the spend cap of period from the budget of
// a project (userID "") or of one user in it, keeping its burn cap; a
// budget left with no cap at all is removed. period must be the budget's
// (invalid_argument otherwise, changing nothing). It returns the budget
// as it was, and whether it is gone.
func ClearBudgetPeriod(ctx context.Context, tx pgx.Tx, projectID, userID, period string, now time.Time) (Budget, bool, error) {
	if !api.ValidBudgetPeriod(period) {
		return Budget{}, false, api.Errorf(api.CodeInvalidArgument, "unknown period %q", period).WithHint("day, week or month")
	}
	bs, err := readBudgets(ctx, tx, `WHERE b.project_id = $1 AND b.user_id = $2 FOR UPDATE`, now, projectID, userID)
	if err != nil {
		return Budget{}, false, err
	}
	switch {
	case len(bs) == 0:
		return Budget{}, false, api.Errorf(api.CodeNotFound, "no budget to clear")
	case bs[0].Period == "":
		return Budget{}, false, api.Errorf(api.CodeInvalidArgument, "the budget caps no spend per period, only the burn").
			WithHint("clear it whole: `gpuaas billing budget clear` without --period")
	case bs[0].Period != period:
		return Budget{}, false, api.Errorf(api.CodeInvalidArgument, "the budget caps the spend per %s, not per %s", bs[0].Period, period).
			WithHint("see `gpuaas billing budget get`")
	case bs[0].BurnCapMinorPerHour == 0:
		b, err := ClearBudget(ctx, tx, projectID, userID, now)
		return b, true, err
	}
	if _, err := tx.Exec(ctx, `UPDATE budgets SET period = NULL, amount_minor = NULL, warned_period = NULL, capped_period = NULL,
		updated_at = $3 WHERE project_id = $1 AND user_id = $2`, projectID, userID, now); err != nil {
		return Budget{}, false, fmt.Errorf("clear the period of the budget of %s: %w", projectID, err)
	}
	return bs[0], false, nil
}

// Budgets lists a project's budgets, its own first, with their scopes'
// spend and burn at now.
func Budgets(ctx context.Context, q Querier, projectID string, now time.Time) ([]Budget, error) {
	return readBudgets(ctx, q, `WHERE b.project_id = $1 ORDER BY b.user_id`, now, projectID)
}

// BudgetsFor lists the budgets that bind a user creating in a project:
// the project's and the user's own, with their spend and burn at now.
func BudgetsFor(ctx context.Context, q Querier, projectID, userID string, now time.Time) ([]Budget, error) {
	return readBudgets(ctx, q, budgetsForSQL, now, projectID, userID)
}

const budgetColumns = `SELECT b.project_id, b.user_id, coalesce(b.period, ''), coalesce(b.amount_minor, 0),
	coalesce(b.burn_cap_minor_per_hour, 0), b.action, b.currency, b.updated_at, b.warned_period, b.capped_period
	FROM budgets b `

// readBudgets reads the budgets the clause selects and their scopes'
// spend and burn at now.
func readBudgets(ctx context.Context, q Querier, clause string, now time.Time, args ...any) ([]Budget, error) {
	rows, err := q.Query(ctx, budgetColumns+clause, args...)
	if err != nil {
		return nil, fmt.Errorf("read budgets: %w", err)
	}
	bs, err := collectBudgets(rows)
	if err != nil {
		return nil, err
	}
	return bs, WithSpend(ctx, q, bs, now)
}

// budgetsForWhere selects the budgets binding a user ($2) creating in a
// project ($1); budgetsForSQL lists them, the project's first.
const (
	budgetsForWhere = `WHERE b.project_id = $1 AND b.user_id IN ('', $2)`
	budgetsForSQL   = budgetsForWhere + ` ORDER BY b.user_id`
)

// noBudgetsGuardSQL fails (division_by_zero) when a budget binds the
// user ($2) creating in the project ($1).
const noBudgetsGuardSQL = `SELECT 1 / (NOT EXISTS (SELECT 1 FROM budgets b ` + budgetsForWhere + `))::int`

// QueueNoBudgetsGuard queues in b a statement that fails with
// ErrBudgetsAppeared when a budget binds userID creating in projectID:
// for a caller that read none earlier in its transaction and decided to
// check none, and that queues it in the round trip which commits. The
// server skips the rest of that round trip after the failure (the
// COMMIT with it), so a budget committed between the earlier read and
// this statement's snapshot is never passed over; the caller runs again
// and reads it.
func QueueNoBudgetsGuard(b *pgx.Batch, projectID, userID string) {
	b.Queue(noBudgetsGuardSQL, projectID, userID).Fn = func(br pgx.BatchResults) error {
		_, err := br.Exec()
		switch {
		case store.IsGuardFailure(err):
			return fmt.Errorf("budgets of %s: %w", projectID, ErrBudgetsAppeared)
		case err != nil:
			return fmt.Errorf("budgets of %s: %w", projectID, err)
		}
		return nil
	}
}

// QueueBudgetsFor queues BudgetsFor's read in b, without the spend (the
// caller adds it with WithSpend when there are budgets at all), for a
// caller that sends it with other statements in one round trip: a create
// in a project without budgets costs no round trip more. *dst is set when
// the batch's results are read.
func QueueBudgetsFor(b *pgx.Batch, dst *[]Budget, projectID, userID string) {
	b.Queue(budgetColumns+budgetsForSQL, projectID, userID).Fn = func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("read budgets: %w", err)
		}
		*dst, err = collectBudgets(rows)
		return err
	}
}

func collectBudgets(rows pgx.Rows) ([]Budget, error) {
	bs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Budget, error) {
		var b Budget
		err := r.Scan(&b.ProjectID, &b.UserID, &b.Period, &b.AmountMinor, &b.BurnCapMinorPerHour, &b.Action,
			&b.Currency, &b.UpdatedAt, &b.warnedPeriod, &b.cappedPeriod)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("read budgets: %w", err)
	}
	return bs, nil
}

// WithSpend fills the period, spend and burn of each budget at now.
func WithSpend(ctx context.Context, q Querier, bs []Budget, now time.Time) error {
	for i := range bs {
		if err := spendOf(ctx, q, &bs[i], now); err != nil {
			return err
		}
	}
	return nil
}

// spendSQL is a scope's spend since $3 at $4 (see Budget.SpentMinor) and
// its running burn: project $1, user $2 (” for the whole project). The
// accrued part is what the accrual will charge the running meters for
// the time since their last window (the same rounding, windowsSQL).
const spendSQL = `SELECT
	coalesce((SELECT sum(u.amount_minor) FROM usage_charges u
		WHERE u.project_id = $1 AND u.created_at >= $3
		  AND ($2 = '' OR u.allocation_id IN (SELECT m.allocation_id FROM billing_meters m
			WHERE m.project_id = $1 AND m.user_id = $2))), 0)::bigint,
	coalesce((SELECT sum(greatest(0, m.price_per_gpu_hour_minor * m.gpus *
			greatest(0, floor(extract(epoch FROM $4::timestamptz - m.started_at))::bigint) / 3600
			- m.price_per_gpu_hour_minor * m.gpus * coalesce(l.end_seconds, 0) / 3600))
		FROM billing_meters m
		LEFT JOIN LATERAL (SELECT u.end_seconds FROM usage_charges u WHERE u.allocation_id = m.allocation_id
			ORDER BY u.window_start DESC LIMIT 1) l ON true
		WHERE m.project_id = $1 AND m.stopped_at IS NULL AND ($2 = '' OR m.user_id = $2)), 0)::bigint,
	coalesce((SELECT sum(m.price_per_gpu_hour_minor * m.gpus) FROM billing_meters m
		WHERE m.project_id = $1 AND m.stopped_at IS NULL AND ($2 = '' OR m.user_id = $2)), 0)::bigint`

// spendOf fills b's period, spend and burn at now.
func spendOf(ctx context.Context, q Querier, b *Budget, now time.Time) error {
	since := now
	if b.Period != "" {
		start, end, err := api.BudgetPeriod(b.Period, now)
		if err != nil {
			return err
		}
		b.PeriodStart, b.PeriodEnd, since = start, end, start
	}
	var charged, accrued, storageCharged, storageAccrued, storageBurn, appCharged, appAccrued, appBurn int64
	if err := q.QueryRow(ctx, spendSQL+storageSpendSQL+appSpendSQL, b.ProjectID, b.UserID, since, now).Scan(&charged, &accrued,
		&b.BurnMinorPerHour, &storageCharged, &storageAccrued, &storageBurn, &appCharged, &appAccrued, &appBurn); err != nil {
		return fmt.Errorf("spend of budget %s/%s: %w", b.ProjectID, b.UserID, err)
	}
	// Volumes count (volumemeter.go): a budget caps what the scope spends.
	// So do apps' own prices (appmeter.go).
	b.BurnMinorPerHour += storageBurn + appBurn
	if b.Period != "" {
		b.SpentMinor = charged + accrued + storageCharged + storageAccrued + appCharged + appAccrued
	}
	return nil
}

// RunningInScope lists the allocations with a running meter in a
// budget's scope (user "" for the whole project).
func RunningInScope(ctx context.Context, q Querier, projectID, userID string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT allocation_id FROM billing_meters
		WHERE project_id = $1 AND stopped_at IS NULL AND ($2 = '' OR user_id = $2) ORDER BY allocation_id`, projectID, userID)
	if err != nil {
		return nil, fmt.Errorf("running allocations of %s: %w", projectID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("running allocations of %s: %w", projectID, err)
	}
	return ids, nil
}

// StillOverBudget reports, in tx, whether a scope's budget still has
// action release and a spend at or over its cap. It share-locks the
// budget, so a change to it waits for tx.
func StillOverBudget(ctx context.Context, tx pgx.Tx, projectID, userID string, now time.Time) (bool, error) {
	bs, err := readBudgets(ctx, tx, `WHERE b.project_id = $1 AND b.user_id = $2 FOR SHARE`, now, projectID, userID)
	if err != nil {
		return false, err
	}
	if len(bs) == 0 {
		return false, nil
	}
	b := bs[0]
	return b.Action == api.BudgetRelease && b.AmountMinor > 0 && b.SpentMinor >= b.AmountMinor, nil
}

// RunningCost is what an allocation's running meter has cost up to now
// (what the accrual will have charged for it, booked or not) and costs
// per hour; ok is false when it has no running meter.
func RunningCost(ctx context.Context, q Querier, allocationID string, now time.Time) (costMinor, perHourMinor int64, currency string, ok bool, err error) {
	err = q.QueryRow(ctx, `SELECT price_per_gpu_hour_minor * gpus *
			greatest(0, floor(extract(epoch FROM $2::timestamptz - started_at))::bigint) / 3600,
		price_per_gpu_hour_minor * gpus, currency
		FROM billing_meters WHERE allocation_id = $1 AND stopped_at IS NULL`, allocationID, now).Scan(
		&costMinor, &perHourMinor, &currency)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, DefaultCurrency, false, nil
	}
	if err != nil {
		return 0, 0, "", false, fmt.Errorf("cost of %s: %w", allocationID, err)
	}
	return costMinor, perHourMinor, currency, true, nil
}
