package alloc

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
)

// Charge is something other than an allocation that adds to a project's
// burn once made (a volume): RequireFunds checks it as Create checks an
// allocation.
type Charge struct {
	ProjectID, ProjectName string
	UserID                 string
	AddMinorPerHour        int64
	Currency               string
	// What names it in a refusal ("this volume").
	What string
}

// RequireFunds refuses c as Create refuses an allocation: with
// insufficient_funds when the project's balance does not last
// rules.MinRunway at its burn with c (c.AddMinorPerHour > 0: a depleted
// project never passes), and
// with budget_exceeded over a budget binding the user. It takes the
// project's funds lock, so a create racing it counts it once made; tx
// must then make c or end.
func RequireFunds(ctx context.Context, tx pgx.Tx, c Charge, rules Rules, now time.Time) error {
	funds, err := lockedFundsFor(ctx, tx, c.ProjectID, c.UserID, c.AddMinorPerHour, rules)
	if err != nil {
		return err
	}
	if !funds.Enough() {
		return newInsufficientFunds(funds, rules, c.Currency, c.ProjectName, "", 0)
	}
	if err := billing.WithSpend(ctx, tx, funds.budgets, now); err != nil {
		return err
	}
	return checkBudgets(ctx, tx, funds.budgets, BudgetRequest{ProjectID: c.ProjectID, ProjectName: c.ProjectName,
		UserID: c.UserID, AddMinorPerHour: c.AddMinorPerHour, Currency: c.Currency, What: c.What})
}
