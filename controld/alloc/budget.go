package alloc

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// BudgetRequest is what CheckBudgets checks: a user creating an
// allocation costing AddMinorPerHour in a project.
type BudgetRequest struct {
	ProjectID, ProjectName string
	UserID                 string
	AddMinorPerHour        int64
	Currency               string
	SKU                    string
	GPUs                   int
	// Placed says the allocation is placed already (a queued request
	// being placed): the scope's burn counts it, so the burn cap adds
	// nothing more for it.
	Placed bool
	// What names what is asked for in a refusal; "this allocation" when
	// empty (RequireFunds: "this volume").
	What string
}

// CheckBudgets refuses, with budget_exceeded (*BudgetExceededError), an
// allocation that would take a budget binding its creator over a cap:
// the project's and the creator's own, each with
//   - a spend cap: spent this period (usage charged since the period
//     started plus what the running allocations accrued since) and the
//     new allocation's first hour over the amount;
//   - a burn cap: what the scope's placed allocations cost per hour (the
//     running ones at their meters' prices, those provisioning at their
//     SKU's) and the new one over the cap.
//
// Create calls it in its transaction, under the project's funds lock, so
// two creates cannot both pass on the same headroom.
func CheckBudgets(ctx context.Context, q store.Querier, r BudgetRequest, now time.Time) error {
	bs, err := billing.BudgetsFor(ctx, q, r.ProjectID, r.UserID, now)
	if err != nil || len(bs) == 0 {
		return err
	}
	return checkBudgets(ctx, q, bs, r)
}

// checkBudgets is CheckBudgets with the budgets read, their spend
// included.
func checkBudgets(ctx context.Context, q store.Querier, bs []billing.Budget, r BudgetRequest) error {
	if len(bs) == 0 {
		return nil
	}
	var err error
	if r.ProjectName == "" {
		if r.ProjectName, err = project.Name(ctx, q, r.ProjectID); err != nil {
			return err
		}
	}
	for _, b := range bs {
		if b.AmountMinor > 0 && b.SpentMinor+r.AddMinorPerHour > b.AmountMinor {
			return newBudgetExceeded(b, r, false, 0)
		}
		if b.BurnCapMinorPerHour > 0 {
			provisioning, err := provisioningBurn(ctx, q, b.ProjectID, b.UserID)
			if err != nil {
				return err
			}
			burn, add := b.BurnMinorPerHour+provisioning, r.AddMinorPerHour
			if r.Placed {
				burn -= add
			}
			if burn+add > b.BurnCapMinorPerHour {
				return newBudgetExceeded(b, r, true, burn)
			}
		}
	}
	return nil
}

// provisioningBurn is what the allocations of a scope (userID "" for the
// whole project) that are still provisioning will cost per hour once
// active.
func provisioningBurn(ctx context.Context, q store.Querier, projectID, userID string) (int64, error) {
	rows, err := q.Query(ctx, `SELECT sku_id, sum(gpus)::bigint FROM allocations
		WHERE project_id = $1 AND ($2 = '' OR user_id = $2) AND state = 'provisioning' GROUP BY sku_id ORDER BY sku_id`,
		projectID, userID)
	if err != nil {
		return 0, fmt.Errorf("provisioning of %s: %w", projectID, err)
	}
	gs, err := collectProvisioning(rows, projectID)
	if err != nil {
		return 0, err
	}
	_, burn, err := money(ctx, q, billing.Account{}, gs)
	return burn, err
}

// BudgetExceededError refuses an allocation over a budget. It is the
// catalog's budget_exceeded to clients (Unwrap), and carries the numbers
// for the audit row of the refusal.
type BudgetExceededError struct {
	Budget billing.Budget
	Req    BudgetRequest
	// RunningMinorPerHour is the scope's burn before the new allocation
	// (set when the burn cap refused it).
	RunningMinorPerHour int64
	err                 *api.Error
}

func newBudgetExceeded(b billing.Budget, r BudgetRequest, burnCap bool, running int64) *BudgetExceededError {
	money := func(v int64) string { return api.FormatMoney(v, r.Currency) }
	which := "project " + r.ProjectName + "'s budget"
	if b.UserID != "" {
		which = "your budget in project " + r.ProjectName
	}
	var msg string
	if !burnCap {
		msg = fmt.Sprintf("budget exceeded: %s is %s per %s, %s is spent (%.0f%%) and %s's first hour costs %s; "+
			"the %s resets %s", which, money(b.AmountMinor), b.Period, money(b.SpentMinor), b.Percent(),
			cmp.Or(r.What, "this allocation"), money(r.AddMinorPerHour), b.Period, b.PeriodEnd.UTC().Format("2006-01-02 15:04 UTC"))
	} else {
		msg = fmt.Sprintf("budget exceeded: %s caps the burn at %s/h; %s/h already running + %s/h for this one",
			which, money(b.BurnCapMinorPerHour), money(running), money(r.AddMinorPerHour))
	}
	return &BudgetExceededError{Budget: b, Req: r, RunningMinorPerHour: running,
		err: api.Errorf(api.CodeBudgetExceeded, "%s", msg).
			WithHint("`gpuaas billing budget get` shows the budgets; a project owner changes them with `gpuaas billing budget set`")}
}

func (e *BudgetExceededError) Error() string { return e.err.Error() }

// Unwrap is the catalog error clients get.
func (e *BudgetExceededError) Unwrap() error { return e.err }

// AuditDetail is what the audit row of the refusal records.
func (e *BudgetExceededError) AuditDetail() map[string]any {
	b := e.Budget
	return map[string]any{"code": api.CodeBudgetExceeded, "sku": e.Req.SKU, "gpus": e.Req.GPUs,
		"budget_user_id": b.UserID, "period": b.Period, "amount_minor": b.AmountMinor, "spent_minor": b.SpentMinor,
		"burn_cap_minor_per_hour": b.BurnCapMinorPerHour, "running_minor_per_hour": e.RunningMinorPerHour,
		"new_minor_per_hour": e.Req.AddMinorPerHour}
}
