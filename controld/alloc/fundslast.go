package alloc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
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

	// What the final round trip read.
	acct         billing.Account
	provisioning int64 // the other provisioning allocations' burn, per hour
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

// final is the check as mutate.Effect.Final: the lock, the other
// provisioning allocations, the account and the budgets binding the creator,
// queued in b in that order; check decides once they are back.
func (c *fundsCheck) final(b *pgx.Batch) func(ctx context.Context, tx pgx.Tx) error {
	queueLockFunds(b, c.projectID)
	// The provisioning allocations before the account: each statement
	// reads a snapshot of its own, and an allocation turning active in
	// between (provisioning -> a running meter, in one commit) is then
	// counted twice rather than not at all.
	b.Queue(othersProvisioningSQL, c.projectID, c.allocID).QueryRow(func(r pgx.Row) error {
		if err := r.Scan(&c.provisioning); err != nil {
			return fmt.Errorf("provisioning of %s: %w", c.projectID, err)
		}
		return nil
	})
	billing.QueueAccountOf(b, &c.acct, c.projectID, 0)
	billing.QueueBudgetsFor(b, &c.budgets, c.projectID, c.userID)
	return c.check
}

// check refuses the create with insufficient_funds when the balance does
// not last rules.MinRunway at the project's burn with it, and with
// budget_exceeded over a budget binding the creator; the budgets' spend
// is read only when there are any (under the lock, still held).
func (c *fundsCheck) check(ctx context.Context, tx pgx.Tx) error {
	f := fundsOf(c.projectID, c.acct.BalanceMinor, c.acct.BurnRateMinorPerHour+c.provisioning, c.addMinorPerHour(), c.rules)
	if !f.Enough() {
		return newInsufficientFunds(f, c.rules, c.sku.Currency, c.projectName, c.sku.ID, c.gpus)
	}
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
