// Package sched places allocations on slots. It owns the placement columns
// of slots (state free/reserved and allocation_id): reserving happens in
// the caller's transaction with FOR UPDATE SKIP LOCKED, so concurrent
// placements never wait on each other and never double-book.
package sched

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ErrNoCapacity means no node can take the request right now.
var ErrNoCapacity = api.ErrNoCapacity

// maxCandidates is the page size of candidates: one placement reads the
// next page only when every candidate of this one is taken or locked by
// concurrent placements (possibly on other controld replicas).
const maxCandidates = 32

// Request is what to place.
type Request struct {
	AllocationID string
	Shape        string
	GPUModel     string
	GPUs         int
}

// Placement is where a request went.
type Placement struct {
	NodeID string
	Slots  []api.Slot
}

// Place reserves slots for r inside tx. Slices go to a single NUMA node
// when any node has room there, best-fit (the fullest group that still
// fits) to keep large groups free; otherwise to the best-fitting node
// across its NUMA nodes. Bare metal takes a whole node whose every slot is
// free. It returns an error wrapping ErrNoCapacity when nothing fits.
func Place(ctx context.Context, tx pgx.Tx, r Request) (Placement, error) {
	if r.GPUs <= 0 {
		return Placement{}, api.Errorf(api.CodeInvalidArgument, "gpus must be positive")
	}
	var pages []candidatePage
	switch r.Shape {
	case api.ShapeBaremetal:
		pages = []candidatePage{baremetalCandidates}
	case api.ShapeGPUSlice:
		// One NUMA node first; across NUMA nodes only when no group fits.
		pages = []candidatePage{numaCandidates, spreadCandidates}
	default:
		return Placement{}, api.Errorf(api.CodeInvalidArgument, "unknown shape %q", r.Shape)
	}
	for _, page := range pages {
		for offset := 0; ; offset += maxCandidates {
			attempts, err := page(ctx, tx, r, offset)
			if err != nil {
				return Placement{}, err
			}
			for _, a := range attempts {
				p, ok, err := tryReserve(ctx, tx, r, a)
				if err != nil {
					return Placement{}, err
				}
				if ok {
					return p, nil
				}
			}
			if len(attempts) < maxCandidates {
				break
			}
		}
	}
	return Placement{}, api.Errorf(api.CodeNoCapacity, "no capacity for %d × %s (%s) right now", r.GPUs, r.GPUModel, r.Shape).
		WithHint("add --queue to wait in line for capacity, or pick another SKU (`gpuaas catalog list`)")
}

// attempt is one place to try: a NUMA group of a node (numa >= 0), or a
// whole node (numa < 0).
type attempt struct {
	nodeID string
	numa   int
	whole  bool // bare metal: every free slot, and exactly GPUs of them
}

// candidatePage returns up to maxCandidates places to try, best first,
// skipping the first offset.
type candidatePage func(ctx context.Context, tx pgx.Tx, r Request, offset int) ([]attempt, error)

// numaCandidates are NUMA groups with room for the whole request, the
// fullest first (best fit).
func numaCandidates(ctx context.Context, tx pgx.Tx, r Request, offset int) ([]attempt, error) {
	rows, err := tx.Query(ctx, `SELECT s.node_id, s.numa_node FROM slots s JOIN nodes n ON n.id = s.node_id
		WHERE s.state = 'free' AND n.state = 'ready' AND n.shape = $1 AND n.gpu_model = $2
		GROUP BY s.node_id, s.numa_node HAVING count(*) >= $3
		ORDER BY count(*), s.node_id, s.numa_node LIMIT $4 OFFSET $5`, r.Shape, r.GPUModel, r.GPUs, maxCandidates, offset)
	if err != nil {
		return nil, fmt.Errorf("slice candidates: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (attempt, error) {
		var a attempt
		return a, row.Scan(&a.nodeID, &a.numa)
	})
	if err != nil {
		return nil, fmt.Errorf("slice candidates: %w", err)
	}
	return out, nil
}

// spreadCandidates are nodes with room for the request across their NUMA
// nodes, the fullest first.
func spreadCandidates(ctx context.Context, tx pgx.Tx, r Request, offset int) ([]attempt, error) {
	rows, err := tx.Query(ctx, `SELECT s.node_id FROM slots s JOIN nodes n ON n.id = s.node_id
		WHERE s.state = 'free' AND n.state = 'ready' AND n.shape = $1 AND n.gpu_model = $2
		GROUP BY s.node_id HAVING count(*) >= $3
		ORDER BY count(*), s.node_id LIMIT $4 OFFSET $5`, r.Shape, r.GPUModel, r.GPUs, maxCandidates, offset)
	if err != nil {
		return nil, fmt.Errorf("spread candidates: %w", err)
	}
	spread, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("spread candidates: %w", err)
	}
	out := make([]attempt, len(spread))
	for i, id := range spread {
		out[i] = attempt{nodeID: id, numa: -1}
	}
	return out, nil
}

// baremetalCandidates are nodes whose every slot is free.
func baremetalCandidates(ctx context.Context, tx pgx.Tx, r Request, offset int) ([]attempt, error) {
	rows, err := tx.Query(ctx, `SELECT n.id FROM nodes n
		WHERE n.state = 'ready' AND n.shape = $1 AND n.gpu_model = $2
		  AND (SELECT count(*) FROM slots s WHERE s.node_id = n.id AND s.state = 'free') = $3
		  AND NOT EXISTS (SELECT 1 FROM slots s WHERE s.node_id = n.id AND s.state IN ('reserved', 'pending'))
		ORDER BY n.id LIMIT $4 OFFSET $5`, r.Shape, r.GPUModel, r.GPUs, maxCandidates, offset)
	if err != nil {
		return nil, fmt.Errorf("baremetal candidates: %w", err)
	}
	nodes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("baremetal candidates: %w", err)
	}
	out := make([]attempt, len(nodes))
	for i, id := range nodes {
		out[i] = attempt{nodeID: id, numa: -1, whole: true}
	}
	return out, nil
}

// tryReserve locks free slots of one candidate, skipping rows other
// placements hold, inside a savepoint: when too few are left the savepoint
// is rolled back, which releases the row locks taken here so other
// placements can use them. It locks only the slots it will reserve (row
// locks last until the transaction ends, so a lock on a slot it does not
// take would hide that slot from concurrent placements until then).
func tryReserve(ctx context.Context, tx pgx.Tx, r Request, a attempt) (Placement, bool, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return Placement{}, false, fmt.Errorf("savepoint: %w", err)
	}
	defer func() { _ = sp.Rollback(ctx) }() // no-op after commit
	var rows pgx.Rows
	switch {
	case a.whole:
		// Bare metal takes every slot of the node.
		rows, err = sp.Query(ctx, `SELECT id FROM slots WHERE node_id = $1 AND state = 'free'
			ORDER BY idx FOR UPDATE SKIP LOCKED`, a.nodeID)
	case a.numa >= 0:
		rows, err = sp.Query(ctx, `SELECT id FROM slots WHERE node_id = $1 AND numa_node = $2 AND state = 'free'
			ORDER BY idx LIMIT $3 FOR UPDATE SKIP LOCKED`, a.nodeID, a.numa, r.GPUs)
	default:
		// Spread as little as possible: fill from the NUMA nodes with the
		// most free slots first.
		rows, err = sp.Query(ctx, `SELECT s.id FROM slots s
			JOIN (SELECT numa_node, count(*) AS free FROM slots WHERE node_id = $1 AND state = 'free'
			      GROUP BY numa_node) g ON g.numa_node = s.numa_node
			WHERE s.node_id = $1 AND s.state = 'free'
			ORDER BY g.free DESC, s.numa_node, s.idx LIMIT $2 FOR UPDATE OF s SKIP LOCKED`, a.nodeID, r.GPUs)
	}
	if err != nil {
		return Placement{}, false, fmt.Errorf("lock slots: %w", err)
	}
	chosen, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return Placement{}, false, fmt.Errorf("lock slots: %w", err)
	}
	if len(chosen) != r.GPUs {
		return Placement{}, false, nil
	}
	if _, err := sp.Exec(ctx, `UPDATE slots SET state = 'reserved', allocation_id = $1 WHERE id = ANY($2)`,
		r.AllocationID, chosen); err != nil {
		return Placement{}, false, fmt.Errorf("reserve slots for %s: %w", r.AllocationID, err)
	}
	if err := sp.Commit(ctx); err != nil {
		return Placement{}, false, fmt.Errorf("release savepoint: %w", err)
	}
	slots, err := node.Slots(ctx, tx, `allocation_id = $1`, r.AllocationID)
	if err != nil {
		return Placement{}, false, err
	}
	return Placement{NodeID: a.nodeID, Slots: slots}, true, nil
}

// Free returns an allocation's slots to the pool.
func Free(ctx context.Context, q store.Querier, allocationID string) (int, error) {
	tag, err := q.Exec(ctx, `UPDATE slots SET state = 'free', allocation_id = NULL WHERE allocation_id = $1`, allocationID)
	if err != nil {
		return 0, fmt.Errorf("free slots of %s: %w", allocationID, err)
	}
	return int(tag.RowsAffected()), nil
}

// IsNoCapacity reports whether err is a no-capacity placement failure.
func IsNoCapacity(err error) bool { return errors.Is(err, ErrNoCapacity) }
