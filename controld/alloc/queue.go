package alloc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
)

// SchedulerActor is the actor id recorded for placements of queued
// requests.
const SchedulerActor = "system:scheduler"

// PlaceQueued places waiting requests in FIFO order per SKU: the oldest
// request of a SKU is placed first, and while it does not fit, the ones
// behind it wait too. A request that fits but that its project can no
// longer pay for (rules.MinRunway, checked again at placement) fails with
// the reason, and the line moves on: left waiting, it would either hold
// up the requests of every other project behind it or jump back ahead of
// them whenever a top-up landed. It returns how many were placed.
func PlaceQueued(ctx context.Context, pool *pgxpool.Pool, rules Rules, now func() time.Time) (int, error) {
	rows, err := pool.Query(ctx, `SELECT DISTINCT sku_id FROM allocations WHERE queued ORDER BY sku_id`)
	if err != nil {
		return 0, fmt.Errorf("queued skus: %w", err)
	}
	skus, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("queued skus: %w", err)
	}
	placed := 0
	for _, sku := range skus {
		for {
			got, err := placeHead(ctx, pool, sku, rules, now())
			if err != nil {
				return placed, err
			}
			if got == headWaits {
				break
			}
			if got == headPlaced {
				placed++
			}
		}
	}
	return placed, nil
}

// headOutcome is what became of the head of a SKU's line.
type headOutcome int

const (
	headWaits  headOutcome = iota // nothing fits, the line is empty, or another placer works it
	headPlaced                    // placed: provisioning
	headFailed                    // fits, but its project cannot pay for it: failed
)

// placeHead tries to place the oldest queued request of a SKU. One placer
// works a SKU's line at a time (a transaction-scoped advisory lock): with
// SKIP LOCKED on the head instead, a second placer (the queue loop racing
// a release's retry, or another replica) would pass over a head the first
// one holds and place the request behind it, jumping the line. A placer
// that finds the line busy leaves it to the one working it.
func placeHead(ctx context.Context, pool *pgxpool.Pool, skuID string, rules Rules, now time.Time) (headOutcome, error) {
	outcome := headWaits
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var mine bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended('alloc.queue:' || $1, 0))`,
			skuID).Scan(&mine); err != nil {
			return fmt.Errorf("queue lock: %w", err)
		}
		if !mine {
			return nil
		}
		var id string
		err := tx.QueryRow(ctx, `SELECT id FROM allocations WHERE queued AND sku_id = $1
			ORDER BY created_at, id LIMIT 1 FOR UPDATE`, skuID).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("queue head: %w", err)
		}
		a, err := load(ctx, tx, id)
		if err != nil {
			return err
		}
		sku, err := catalog.Get(ctx, tx, skuID)
		if err != nil {
			return err
		}
		if err := lockFunds(ctx, tx, a.ProjectID); err != nil {
			return err
		}
		from := a.State
		if outcome, err = placeFunded(ctx, tx, &a, sku, rules, now); err != nil || outcome == headWaits {
			return err
		}
		ev, err := stateEvent(ctx, tx, a, from)
		if err != nil {
			return err
		}
		entry := audit.Entry{Action: "alloc.place_queued", TargetType: "allocation", TargetID: a.ID, ProjectID: a.ProjectID,
			Detail: map[string]any{"node_id": a.NodeID}}
		if outcome == headFailed {
			entry.Action, entry.Detail = "alloc.queued_unfunded", map[string]any{"reason": a.Reason}
		}
		if err := audit.Write(ctx, tx, audit.Meta{At: now, ActorID: SchedulerActor}, entry); err != nil {
			return err
		}
		_, err = outbox.Enqueue(ctx, tx, now, ev)
		return err
	})
	return outcome, err
}

// placeFunded places a queued request in a savepoint and then checks its
// project's funds, the request now counted in the burn, and the budgets
// binding its creator (CheckBudgets). When the funds fall short of
// rules.MinRunway, or a budget would be exceeded, the placement is undone
// and the request fails with the reason. Capacity is looked at first: a request that does not
// fit keeps waiting whatever the balance, and is checked when it does.
func placeFunded(ctx context.Context, tx pgx.Tx, a *api.Allocation, sku api.SKU, rules Rules, now time.Time) (headOutcome, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return headWaits, fmt.Errorf("savepoint: %w", err)
	}
	defer func() { _ = sp.Rollback(ctx) }() // no-op after commit
	requested := *a
	placed, err := place(ctx, sp, a, sku, SchedulerActor, now)
	if err != nil || !placed {
		return headWaits, err
	}
	funds, err := FundsFor(ctx, sp, a.ProjectID, 0, rules)
	if err != nil {
		return headWaits, err
	}
	var over error
	if funds.Enough() {
		// The budgets binding its creator, as at create (docs/budgets.md).
		over = CheckBudgets(ctx, sp, BudgetRequest{ProjectID: a.ProjectID, UserID: a.UserID,
			AddMinorPerHour: sku.PricePerGPUHourMinor * int64(a.GPUs), Currency: sku.Currency, SKU: sku.ID, GPUs: a.GPUs,
			Placed: true}, now)
		if over == nil {
			return headPlaced, sp.Commit(ctx)
		}
		if api.CodeOf(over) != api.CodeBudgetExceeded {
			return headWaits, over
		}
	}
	if err := sp.Rollback(ctx); err != nil {
		return headWaits, fmt.Errorf("undo placement: %w", err)
	}
	*a = requested
	if over != nil {
		reason := over.Error() + "; the request left the queue: create it again once the budget allows"
		return headFailed, transition(ctx, tx, a, api.AllocFailed, reason, SchedulerActor, now)
	}
	name, err := project.Name(ctx, tx, a.ProjectID)
	if err != nil {
		return headWaits, err
	}
	funds.NewMinorPerHour = sku.PricePerGPUHourMinor * int64(a.GPUs)
	funds.RunningMinorPerHour = funds.BurnMinorPerHour - funds.NewMinorPerHour
	reason := newInsufficientFunds(funds, rules, sku.Currency, name, sku.ID, a.GPUs).err.Message +
		"; the request left the queue: " + rules.topupHint() + ", then create it again"
	return headFailed, transition(ctx, tx, a, api.AllocFailed, reason, SchedulerActor, now)
}
