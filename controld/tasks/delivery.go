package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
)

// Claimed is a task taken for delivery.
type Claimed struct {
	ID, NodeID, Type string
	Params           []byte
	// Corr is the correlation id of the request that queued the task
	// ("" for none).
	Corr string
	// Attempts counts deliveries, this one included.
	Attempts int
}

// Claim marks up to limit due tasks dispatched and returns them, oldest
// first: pending tasks whose next attempt is due, and dispatched ones sent
// before redeliverBefore that were never answered (controld died
// mid-delivery, or the reply was lost). A task waits while an earlier task
// of its allocation is unfinished. Concurrent claimers (other replicas)
// skip each other's rows.
func Claim(ctx context.Context, q store.Querier, now, redeliverBefore time.Time, limit int) ([]Claimed, error) {
	rows, err := q.Query(ctx, `UPDATE node_tasks t SET state = 'dispatched', dispatched_at = $1,
			attempts = attempts + 1, updated_at = $1
		WHERE t.id IN (
			SELECT c.id FROM node_tasks c
			WHERE ((c.state = 'pending' AND c.next_attempt_at <= $1) OR (c.state = 'dispatched' AND c.dispatched_at < $2))
			  AND NOT EXISTS (SELECT 1 FROM node_tasks p WHERE c.allocation_id IS NOT NULL
			      AND p.allocation_id = c.allocation_id AND p.state IN `+unfinished+`
			      AND (p.created_at, p.id) < (c.created_at, c.id))
			ORDER BY c.created_at, c.id LIMIT $3 FOR UPDATE SKIP LOCKED)
		RETURNING t.id, t.node_id, t.type, `+paramsAndCorr("t")+`, t.attempts`, now, redeliverBefore, limit)
	if err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Claimed, error) {
		var c Claimed
		return c, r.Scan(&c.ID, &c.NodeID, &c.Type, &c.Params, &c.Corr, &c.Attempts)
	})
	if err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	return batch, nil
}

// Retry puts a dispatched task the node did not take back in line, due at
// next.
func Retry(ctx context.Context, q store.Querier, id string, next, now time.Time) error {
	if _, err := q.Exec(ctx, `UPDATE node_tasks SET state = 'pending', next_attempt_at = $2, updated_at = $3
		WHERE id = $1 AND state = 'dispatched'`, id, next, now); err != nil {
		return fmt.Errorf("retry task %s: %w", id, err)
	}
	return nil
}

// Accept records that the node took a dispatched task.
func Accept(ctx context.Context, q store.Querier, id string, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE node_tasks SET state = 'accepted', accepted_at = $2, updated_at = $2
		WHERE id = $1 AND state = 'dispatched'`, id, now)
	return err
}

// Pending is an unfinished task a node should be working on.
type Pending struct {
	ID, Type string
	Params   []byte
	Corr     string // as in Claimed
}

// PendingFor returns the unfinished tasks of a node that no earlier task
// of the same allocation holds back, oldest first.
func PendingFor(ctx context.Context, q store.Querier, nodeID string) ([]Pending, error) {
	rows, err := q.Query(ctx, `SELECT c.id, c.type, `+paramsAndCorr("c")+` FROM node_tasks c
		WHERE c.node_id = $1 AND c.state IN `+unfinished+`
		  AND NOT EXISTS (SELECT 1 FROM node_tasks p WHERE c.allocation_id IS NOT NULL
		      AND p.allocation_id = c.allocation_id AND p.state IN `+unfinished+`
		      AND (p.created_at, p.id) < (c.created_at, c.id))
		ORDER BY c.created_at, c.id`, nodeID)
	if err != nil {
		return nil, fmt.Errorf("pending tasks: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Pending, error) {
		var x Pending
		return x, r.Scan(&x.ID, &x.Type, &x.Params, &x.Corr)
	})
	if err != nil {
		return nil, fmt.Errorf("pending tasks: %w", err)
	}
	return list, nil
}

// Overdue is an unfinished task created before a deadline.
type Overdue struct{ ID, NodeID, State string }

// OverdueBefore returns up to limit unfinished tasks created before
// cutoff, oldest first.
func OverdueBefore(ctx context.Context, q store.Querier, cutoff time.Time, limit int) ([]Overdue, error) {
	rows, err := q.Query(ctx, `SELECT id, node_id, state FROM node_tasks
		WHERE state IN `+unfinished+` AND created_at < $1 ORDER BY created_at LIMIT $2`, cutoff, limit)
	if err != nil {
		return nil, fmt.Errorf("find overdue tasks: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Overdue, error) {
		var o Overdue
		return o, r.Scan(&o.ID, &o.NodeID, &o.State)
	})
	if err != nil {
		return nil, fmt.Errorf("find overdue tasks: %w", err)
	}
	return list, nil
}
