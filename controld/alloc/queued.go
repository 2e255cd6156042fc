package alloc

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
)

// Held is an allocation's state as a transaction holds it under a share
// lock: a transition of it (which updates the row) waits for that
// transaction to end (controld/jobs queued jobs,
// docs/decisions/0034-queued-jobs-start-themselves.md).
type Held struct {
	State, NodeID, Reason string
}

// HoldState reads an allocation's state under a share lock.
func HoldState(ctx context.Context, q store.Querier, id string) (Held, error) {
	var h Held
	if err := q.QueryRow(ctx, `SELECT state, coalesce(node_id, ''), reason FROM allocations WHERE id = $1 FOR SHARE`,
		id).Scan(&h.State, &h.NodeID, &h.Reason); err != nil {
		return h, fmt.Errorf("hold allocation %s: %w", id, err)
	}
	return h, nil
}

// QueuePositions are the places in line of those of ids that wait for
// capacity (as alloc.get counts them: the requests of the SKU queued
// before it, plus one); the others are absent.
func QueuePositions(ctx context.Context, q store.Querier, ids []string) (map[string]int, error) {
	out := map[string]int{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT a.id, (SELECT count(*) + 1 FROM allocations o WHERE o.queued AND o.sku_id = a.sku_id
		AND (o.created_at, o.id) < (a.created_at, a.id)) FROM allocations a WHERE a.queued AND a.id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("queue positions: %w", err)
	}
	var id string
	var pos int
	_, err = pgx.ForEachRow(rows, []any{&id, &pos}, func() error { out[id] = pos; return nil })
	if err != nil {
		return nil, fmt.Errorf("queue positions: %w", err)
	}
	return out, nil
}
