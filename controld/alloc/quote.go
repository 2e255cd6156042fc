package alloc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/sched"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TxBeginner starts transactions; a pool satisfies it.
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Quote answers what Create would do with req, without doing it: it
// validates req exactly as Create does, prices it, and runs the real
// placement in a transaction that is always rolled back, so no
// allocation, slot reservation, task, audit, outbox or idempotency row
// survives. Like any placement it briefly locks the slots it would take
// (FOR UPDATE SKIP LOCKED), so a create racing a quote may pass over them,
// as it would pass over those of a create that then fails.
func Quote(ctx context.Context, db TxBeginner, actor Actor, req api.AllocCreateRequest, now time.Time) (api.AllocQuote, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return api.AllocQuote{}, fmt.Errorf("quote: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // always: a quote changes nothing
	p, sku, err := checkCreate(ctx, tx, actor, req)
	if err != nil {
		return api.AllocQuote{}, err
	}
	// Volumes decide the node, as in Create (volumes.go); a refusal
	// there is the quote's answer.
	claim, err := claimVolumes(ctx, tx, p.ID, sku, req, now)
	if err != nil {
		return api.AllocQuote{}, err
	}
	q := api.AllocQuote{ProjectID: p.ID, SKU: sku.ID, Shape: sku.Shape, GPUs: req.GPUs,
		PricePerHourMinor: sku.PricePerGPUHourMinor * int64(req.GPUs), Currency: sku.Currency}
	// Placement reserves slots for an allocation row (a foreign key), so
	// the row is inserted too; the rollback takes both away.
	a, err := insertRequested(ctx, tx, p, sku, actor, req.GPUs, now, nil, nil)
	if err != nil {
		return api.AllocQuote{}, err
	}
	pl, err := sched.Place(ctx, tx, sched.Request{AllocationID: a.ID, Shape: sku.Shape, GPUModel: sku.GPUModel, GPUs: a.GPUs,
		NodeID: claim.NodeID})
	switch {
	case err == nil:
		q.Fits, q.NodeID = true, pl.NodeID
	case !sched.IsNoCapacity(err) || claim.NodeID != "":
		return api.AllocQuote{}, err
	case req.Queue:
		// FIFO per SKU: behind every request of the SKU already waiting.
		var ahead int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM allocations WHERE queued AND sku_id = $1`, sku.ID).Scan(&ahead); err != nil {
			return api.AllocQuote{}, fmt.Errorf("queue position: %w", err)
		}
		q.Queued, q.QueuePosition = true, ahead+1
	}
	return q, nil
}

// Runway is how many seconds balance pays for at pricePerHour (both in
// minor units), rounded down; zero when the balance is used up. ok is
// false when the price is zero: the runway has no end.
func Runway(balance, pricePerHour int64) (seconds int64, ok bool) {
	if pricePerHour <= 0 {
		return 0, false
	}
	if balance <= 0 {
		return 0, true
	}
	// balance*3600/price without overflowing for large balances.
	whole, rest := balance/pricePerHour, balance%pricePerHour
	return whole*3600 + rest*3600/pricePerHour, true
}
