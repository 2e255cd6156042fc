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
)

// SchedulerActor is the actor id recorded for placements of queued
// requests.
const SchedulerActor = "system:scheduler"

// PlaceQueued places waiting requests in FIFO order per SKU: the oldest
// request of a SKU is placed first, and while it does not fit, the ones
// behind it wait too. It returns how many were placed.
func PlaceQueued(ctx context.Context, pool *pgxpool.Pool, now func() time.Time) (int, error) {
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
			ok, err := placeHead(ctx, pool, sku, now())
			if err != nil {
				return placed, err
			}
			if !ok {
				break
			}
			placed++
		}
	}
	return placed, nil
}

// placeHead tries to place the oldest queued request of a SKU. One placer
// works a SKU's line at a time (a transaction-scoped advisory lock): with
// SKIP LOCKED on the head instead, a second placer (the queue loop racing
// a release's retry, or another replica) would pass over a head the first
// one holds and place the request behind it, jumping the line. A placer
// that finds the line busy leaves it to the one working it.
func placeHead(ctx context.Context, pool *pgxpool.Pool, skuID string, now time.Time) (bool, error) {
	placed := false
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
		from := a.State
		if placed, err = place(ctx, tx, &a, sku, SchedulerActor, now); err != nil || !placed {
			return err
		}
		ev, err := stateEvent(ctx, tx, a, from)
		if err != nil {
			return err
		}
		if err := audit.Write(ctx, tx, audit.Meta{At: now, ActorID: SchedulerActor}, audit.Entry{
			Action: "alloc.place_queued", TargetType: "allocation", TargetID: a.ID, ProjectID: a.ProjectID,
			Detail: map[string]any{"node_id": a.NodeID}}); err != nil {
			return err
		}
		_, err = outbox.Enqueue(ctx, tx, now, ev)
		return err
	})
	return placed, err
}
