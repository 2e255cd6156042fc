package alloc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Rules are what a placement must satisfy besides capacity.
type Rules struct {
	// MinRunway is how long the project's balance must last at its total
	// burn, the new allocation included, for a create (or the placement of
	// a queued request) to go ahead (billing.Settings.MinRunway).
	MinRunway time.Duration
	// TopupsOff says the platform takes no top-ups (no payment provider is
	// configured, as in `gpuaas dev` without --stripe-api): the
	// insufficient-funds hint then points to an administrator's credit.
	TopupsOff bool
}

// topupHint is how a project gets money on this platform.
func (r Rules) topupHint() string {
	if r.TopupsOff {
		return "top-ups are off on this platform (no payment provider): an administrator can add credit " +
			"(`gpuaas admin credit --project PROJECT --amount AMOUNT --reason REASON`)"
	}
	return "top up with `gpuaas billing topup`"
}

// Funds is a project's money as a create sees it.
type Funds struct {
	ProjectID    string
	BalanceMinor int64
	// RunningMinorPerHour is what the project's placed allocations cost
	// per hour: the active ones at their meters' prices and those still
	// provisioning (charged once active, within moments) at their SKU's
	// price. NewMinorPerHour is the allocation being asked for, and
	// BurnMinorPerHour the two together.
	RunningMinorPerHour int64
	NewMinorPerHour     int64
	BurnMinorPerHour    int64
	// RunwaySeconds is how long the balance lasts at BurnMinorPerHour;
	// Endless when nothing is charged.
	RunwaySeconds int64
	Endless       bool
	// MinRunway is the runway required, and NeededMinor what it costs at
	// BurnMinorPerHour (rounded up).
	MinRunway   time.Duration
	NeededMinor int64
	// budgets are the budgets binding the creator (lockedFundsFor reads
	// them in its round trip), without their spend.
	budgets []billing.Budget
}

// Enough reports whether the balance covers the minimum runway.
func (f Funds) Enough() bool { return f.BalanceMinor >= f.NeededMinor }

// projectMoney reads a project's balance and what its placed allocations
// cost per hour: the active ones at the price their meters run at (the
// burn `billing balance` shows), those still provisioning at their SKU's
// price (charged once active, within moments). Queued requests cost
// nothing until placed. Each table is read through its owner.
func projectMoney(ctx context.Context, q store.Querier, projectID string) (balance, burn int64, err error) {
	acct, err := billing.AccountOf(ctx, q, projectID, 0)
	if err != nil {
		return 0, 0, err
	}
	rows, err := q.Query(ctx, provisioningSQL, projectID)
	if err != nil {
		return 0, 0, fmt.Errorf("provisioning of %s: %w", projectID, err)
	}
	provisioning, err := collectProvisioning(rows, projectID)
	if err != nil {
		return 0, 0, err
	}
	return money(ctx, q, acct, provisioning)
}

const provisioningSQL = `SELECT sku_id, sum(gpus)::bigint FROM allocations
		WHERE project_id = $1 AND state = 'provisioning' GROUP BY sku_id ORDER BY sku_id`

type skuGPUs struct {
	sku  string
	gpus int64
}

func collectProvisioning(rows pgx.Rows, projectID string) ([]skuGPUs, error) {
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (skuGPUs, error) {
		var g skuGPUs
		return g, r.Scan(&g.sku, &g.gpus)
	})
	if err != nil {
		return nil, fmt.Errorf("provisioning of %s: %w", projectID, err)
	}
	return out, nil
}

// money is projectMoney's sum of what it read.
func money(ctx context.Context, q store.Querier, acct billing.Account, provisioning []skuGPUs) (balance, burn int64, err error) {
	burn = acct.BurnRateMinorPerHour
	for _, g := range provisioning {
		price, _, err := catalog.Price(ctx, q, g.sku)
		if err != nil {
			return 0, 0, err
		}
		burn += price * g.gpus
	}
	return acct.BalanceMinor, burn, nil
}

// lockedFundsFor is lockFunds then FundsFor, with the lock and
// projectMoney's two reads in one round trip: the reads come after the
// lock in the same pipeline, and each takes its snapshot once the lock
// is held, as they did as statements of their own. The budgets binding
// userID in the project come in the same round trip (Funds.budgets).
func lockedFundsFor(ctx context.Context, tx pgx.Tx, projectID, userID string, addMinorPerHour int64, rules Rules) (Funds, error) {
	b := &pgx.Batch{}
	queueLockFunds(b, projectID)
	var acct billing.Account
	billing.QueueAccountOf(b, &acct, projectID, 0)
	var budgets []billing.Budget
	billing.QueueBudgetsFor(b, &budgets, projectID, userID)
	var provisioning []skuGPUs
	b.Queue(provisioningSQL, projectID).Fn = func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("provisioning of %s: %w", projectID, err)
		}
		provisioning, err = collectProvisioning(rows, projectID)
		return err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return Funds{}, err
	}
	balance, burn, err := money(ctx, tx, acct, provisioning)
	if err != nil {
		return Funds{}, err
	}
	f := fundsOf(projectID, balance, burn, addMinorPerHour, rules)
	f.budgets = budgets
	return f, nil
}

// FundsFor reads a project's balance and burn and what it needs to add
// an allocation costing addMinorPerHour (0 when the allocation is
// already counted, being placed) under rules.
func FundsFor(ctx context.Context, q store.Querier, projectID string, addMinorPerHour int64, rules Rules) (Funds, error) {
	balance, burn, err := projectMoney(ctx, q, projectID)
	if err != nil {
		return Funds{ProjectID: projectID, NewMinorPerHour: addMinorPerHour, MinRunway: rules.MinRunway}, err
	}
	return fundsOf(projectID, balance, burn, addMinorPerHour, rules), nil
}

func fundsOf(projectID string, balance, running, addMinorPerHour int64, rules Rules) Funds {
	f := Funds{ProjectID: projectID, NewMinorPerHour: addMinorPerHour, MinRunway: rules.MinRunway,
		BalanceMinor: balance, RunningMinorPerHour: running}
	f.BurnMinorPerHour = f.RunningMinorPerHour + addMinorPerHour
	var charged bool
	f.RunwaySeconds, charged = Runway(f.BalanceMinor, f.BurnMinorPerHour)
	f.Endless = !charged
	secs := int64((rules.MinRunway + time.Second - 1) / time.Second)
	f.NeededMinor = (f.BurnMinorPerHour*secs + 3599) / 3600
	return f
}

// lockFunds serializes the funds checks of one project until tx ends: two
// creates racing in one project would each see the balance without the
// other's allocation and both pass. The second waits, then counts the
// first (placed allocations are part of the burn). Create takes it in its
// final round trip (fundslast.go), the queue's placer and RequireFunds
// before their writes; all of them before the audit row, whose chain
// locks the project's stream (docs/decisions/0042-funds-lock-last.md).
func lockFunds(ctx context.Context, tx pgx.Tx, projectID string) error {
	if _, err := tx.Exec(ctx, lockFundsSQL, projectID); err != nil {
		return fmt.Errorf("lock funds of %s: %w", projectID, err)
	}
	return nil
}

func queueLockFunds(b *pgx.Batch, projectID string) {
	b.Queue(lockFundsSQL, projectID).Fn = func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("lock funds of %s: %w", projectID, err)
		}
		return nil
	}
}

// lockFundsSQL takes the lock and, for the rest of the transaction, ends
// the session if it is left idle 10 s (instead of store's 30 s): a
// replica paused or cut off while holding a project's funds lock would
// otherwise keep every create of that project waiting — each holding a
// pool connection the other replica's requests then lack — for 30 s.
const lockFundsSQL = `SELECT set_config('idle_in_transaction_session_timeout', '10s', true),
		pg_advisory_xact_lock(hashtextextended('alloc.funds:' || $1, 0))`

// InsufficientFundsError refuses an allocation the project's balance does
// not cover for the minimum runway. It is the catalog's
// insufficient_funds to clients (Unwrap), and carries the numbers for the
// audit row of the refusal.
type InsufficientFundsError struct {
	Funds Funds
	SKU   string
	GPUs  int
	err   *api.Error
}

func newInsufficientFunds(f Funds, rules Rules, currency, projectName, sku string, gpus int) *InsufficientFundsError {
	money := func(v int64) string { return api.FormatMoney(v, currency) }
	msg := fmt.Sprintf("insufficient funds: project %s has %s, which does not cover %s at %s/h", projectName,
		money(f.BalanceMinor), formatDuration(f.MinRunway), money(f.BurnMinorPerHour))
	if f.RunningMinorPerHour > 0 && f.NewMinorPerHour > 0 {
		msg += fmt.Sprintf(" (%s/h already running + %s/h for this one)", money(f.RunningMinorPerHour), money(f.NewMinorPerHour))
	}
	msg += fmt.Sprintf("; %s is needed", money(f.NeededMinor))
	return &InsufficientFundsError{Funds: f, SKU: sku, GPUs: gpus,
		err: api.Errorf(api.CodeInsufficientFunds, "%s", msg).
			WithHint(rules.topupHint() + "; `gpuaas billing balance` shows the balance and burn")}
}

func (e *InsufficientFundsError) Error() string { return e.err.Error() }

// Unwrap is the catalog error clients get.
func (e *InsufficientFundsError) Unwrap() error { return e.err }

// AuditDetail is what the audit row of the refusal records.
func (e *InsufficientFundsError) AuditDetail() map[string]any {
	f := e.Funds
	return map[string]any{"code": api.CodeInsufficientFunds, "sku": e.SKU, "gpus": e.GPUs,
		"balance_minor": f.BalanceMinor, "running_minor_per_hour": f.RunningMinorPerHour,
		"new_minor_per_hour": f.NewMinorPerHour, "needed_minor": f.NeededMinor, "min_runway_seconds": int64(f.MinRunway / time.Second)}
}

// formatDuration says a runway the way people do: "10 minutes", "1h30m".
func formatDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0 && d >= time.Hour:
		return plural(int64(d/time.Hour), "hour")
	case d%time.Minute == 0 && d >= time.Minute:
		return plural(int64(d/time.Minute), "minute")
	}
	return d.String()
}

func plural(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
