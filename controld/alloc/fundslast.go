package alloc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// fundsCheck is a create's funds and budget check, taken last
// (docs/decisions/0042-funds-lock-last.md): Create places first, then
// hands the check to mutate as Effect.Final, which queues it in the
// transaction's final round trip, ahead of the create's audit, outbox
// and idempotency rows. The project's funds lock comes first in that
// check and each read after it takes its snapshot once the lock is held,
// so it counts every create of the project that committed before; the
// lock is then held only until the COMMIT that follows.
type fundsCheck struct {
	projectID, projectName, userID string
	// allocID is the allocation being created: placed, it is
	// provisioning already, and the sum of the others leaves it out
	// (it is added once, as NewMinorPerHour).
	allocID string
	sku     api.SKU
	gpus    int
	placed  bool
	rules   Rules
	now     time.Time

	// budgetsSeen says budgets bound the creator when the allocation
	// was inserted: the final round trip reads them again, under the
	// lock, and the COMMIT waits for their check.
	budgetsSeen bool

	// What the final round trip read.
	acct         billing.Account
	provisioning int64  // the other provisioning allocations' burn, per hour
	shortInDB    string // fundsCheckSQL's verdict: "true" when short
	budgets      []billing.Budget
}

// addMinorPerHour is what the allocation being created costs per hour.
func (c *fundsCheck) addMinorPerHour() int64 { return c.sku.PricePerGPUHourMinor * int64(c.gpus) }

// othersProvisioningSQL is what the project's provisioning allocations,
// the one being created ($2) excepted, cost per hour at their SKUs'
// prices: projectMoney's sum and money's prices in one statement.
const othersProvisioningSQL = `SELECT coalesce(sum(s.price_per_gpu_hour_minor * a.gpus), 0)::bigint
		FROM allocations a JOIN skus s ON s.id = a.sku_id
		WHERE a.project_id = $1 AND a.state = 'provisioning' AND a.id <> $2`

// fundsCheckSQL is the funds check in one statement: the account
// (billing's read, spliced in by billing.QueueAccountCheck), the other
// provisioning allocations' burn, and whether the balance falls short of
// the minimum runway ($4 seconds) with this allocation ($3 per hour)
// added: fundsOf's rule, in the same integer arithmetic. The verdict is
// kept in a transaction-local setting for fundsGuardSQL; the numbers come
// back for the refusal's message. One statement, one snapshot: taken
// after the lock (the statement before it in the pipeline) was granted,
// so it counts every create of the project that committed before.
const fundsCheckSQL = `SELECT a.*, o.minor, set_config('gpuaas.funds_short',
		(a.balance < ((a.meters_burn + a.storage_burn + a.app_burn + o.minor + $3::bigint) * $4::bigint + 3599) / 3600)::text, true)
		FROM (ACCOUNT) a, (` + othersProvisioningSQL + `) o(minor)`

// fundsGuardSQL fails (division_by_zero) when fundsCheckSQL found the
// balance short: the rest of the pipeline — the audit, outbox and
// idempotency rows and the COMMIT — is then skipped and the transaction
// rolled back, with no round trip to the client between the check and
// the COMMIT.
const fundsGuardSQL = `SELECT 1 / (NOT current_setting('gpuaas.funds_short')::bool)::int`

// final is the check as mutate.Effect.Final: the lock, then the funds
// check as one statement and its guard, queued in b in that order
// (docs/decisions/0067-create-lock-order.md). A creator bound by no
// budget (read with the insert, insertRequested) needs nothing more: the
// check is decided in the database and final returns nil, so mutate
// sends the COMMIT in the same round trip. Otherwise the budgets binding
// the creator are read under the lock too, and check decides them once
// the round trip is back (the COMMIT then follows in a round trip of its
// own).
func (c *fundsCheck) final(b *pgx.Batch) func(ctx context.Context, tx pgx.Tx) error {
	queueLockFunds(b, c.projectID)
	secs := int64((c.rules.MinRunway + time.Second - 1) / time.Second)
	billing.QueueAccountCheck(b, &c.acct, fundsCheckSQL, []any{c.projectID, c.allocID, c.addMinorPerHour(), secs},
		[]any{&c.provisioning, &c.shortInDB}, c.agree)
	b.Queue(fundsGuardSQL).Fn = func(br pgx.BatchResults) error {
		_, err := br.Exec()
		switch {
		case store.IsGuardFailure(err):
			return newInsufficientFunds(c.funds(), c.rules, c.sku.Currency, c.projectName, c.sku.ID, c.gpus)
		case err != nil:
			return fmt.Errorf("funds of %s: %w", c.projectID, err)
		}
		return nil
	}
	if !c.budgetsSeen {
		// None bound the creator at the insert; one set since (while
		// this create waited for the lock, say) fails the round trip
		// before its COMMIT, and the create runs again to check it.
		billing.QueueNoBudgetsGuard(b, c.projectID, c.userID)
		return nil
	}
	billing.QueueBudgetsFor(b, &c.budgets, c.projectID, c.userID)
	return c.check
}

// funds is what the final round trip read, as fundsOf's Funds.
func (c *fundsCheck) funds() Funds {
	return fundsOf(c.projectID, c.acct.BalanceMinor, c.acct.BurnRateMinorPerHour+c.provisioning, c.addMinorPerHour(), c.rules)
}

// agree checks that the database's verdict is fundsOf's on the same
// numbers: the rule is written twice (SQL for the check, Go for quotes
// and the refusal's message), and a difference is a bug. The database's
// verdict is the one that counts: when the COMMIT went in the same round
// trip it has run by the time agree does, and mutate.Runner logs the
// difference and answers with the committed reply.
func (c *fundsCheck) agree() error {
	if short := !c.funds().Enough(); short != (c.shortInDB == "true") {
		return fmt.Errorf("funds of %s: the database says short=%s, fundsOf %v on %+v", c.projectID, c.shortInDB, short, c.funds())
	}
	return nil
}

// check refuses the create with budget_exceeded over a budget binding
// the creator; the budgets' spend is read under the lock, still held.
// The funds were decided in the final round trip (fundsGuardSQL).
func (c *fundsCheck) check(ctx context.Context, tx pgx.Tx) error {
	if len(c.budgets) == 0 {
		return nil
	}
	if err := billing.WithSpend(ctx, tx, c.budgets, c.now); err != nil {
		return err
	}
	return checkBudgets(ctx, tx, c.budgets, c.budgetRequest(c.placed))
}

func (c *fundsCheck) budgetRequest(placed bool) BudgetRequest {
	return BudgetRequest{ProjectID: c.projectID, ProjectName: c.projectName, UserID: c.userID,
		AddMinorPerHour: c.addMinorPerHour(), Currency: c.sku.Currency, SKU: c.sku.ID, GPUs: c.gpus, Placed: placed}
}

// refusalOrder keeps the order of a create's refusals from when the
// funds were checked before placing: a create refused for capacity or by
// its volumes (err, a catalog error) is refused with insufficient_funds
// or budget_exceeded instead when those apply too. Nothing was placed
// (its refusal rolls everything back), so the funds are read without the
// lock: a refusal changes nothing, and either refusal is true when read.
// An error of its own, or an internal err, leaves err as it is.
func (c *fundsCheck) refusalOrder(ctx context.Context, tx pgx.Tx, err error) error {
	if api.CodeOf(err) == api.CodeInternal {
		return err
	}
	f, ferr := FundsFor(ctx, tx, c.projectID, c.addMinorPerHour(), c.rules)
	if ferr != nil {
		return err
	}
	if !f.Enough() {
		return newInsufficientFunds(f, c.rules, c.sku.Currency, c.projectName, c.sku.ID, c.gpus)
	}
	if over := CheckBudgets(ctx, tx, c.budgetRequest(false), c.now); api.CodeOf(over) == api.CodeBudgetExceeded {
		return over
	}
	return err
}
