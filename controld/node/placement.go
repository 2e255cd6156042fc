package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Room is free capacity to look for: GPUs free slots on ready nodes of a
// shape and GPU model.
type Room struct {
	Shape    string
	GPUModel string
	GPUs     int
}

// Candidate is one place slots may be reserved in: a NUMA group of a node
// (NUMA >= 0), a whole node across its NUMA nodes (NUMA < 0), or, with
// Whole, every slot of a node.
type Candidate struct {
	NodeID string
	NUMA   int
	Whole  bool
}

// Candidates are read from slot_groups (migration 0015), the free and busy
// slot counts per (node, NUMA node) and per node (numa_node = -1) that
// triggers on slots keep, through an index ordered by free count: a page
// costs the same whatever the size of the fleet. A count row changed by a
// transaction while another held it lags by the deltas in
// slot_group_deltas until the next change folds them in, so each kind of
// candidate has a second list, of the few rows with deltas that fit only
// once their deltas count; Reserve checks every candidate against the
// slots themselves.

// NUMAGroupsWithRoom returns NUMA groups with room for the whole request,
// the fullest first (best fit), up to limit of them after skipping offset.
func NUMAGroupsWithRoom(ctx context.Context, q store.Querier, r Room, limit, offset int) ([]Candidate, error) {
	rows, err := q.Query(ctx, `SELECT node_id, numa_node FROM slot_groups
		WHERE ready AND numa_node >= 0 AND shape = $1 AND gpu_model = $2 AND free >= $3
		ORDER BY free, node_id, numa_node `+pageClause(limit, offset), r.Shape, r.GPUModel, r.GPUs)
	return collectCandidates(rows, err, "slice candidates", Candidate{})
}

// NUMAGroupsWithRoomInDeltas returns the NUMA groups that
// NUMAGroupsWithRoom leaves out but have room once their deltas count.
func NUMAGroupsWithRoomInDeltas(ctx context.Context, q store.Querier, r Room, limit, offset int) ([]Candidate, error) {
	rows, err := q.Query(ctx, `SELECT g.node_id, g.numa_node
		FROM (SELECT node_id, numa_node, sum(free) AS free FROM slot_group_deltas WHERE numa_node >= 0
		      GROUP BY node_id, numa_node) d
		CROSS JOIN LATERAL (SELECT * FROM slot_groups g WHERE g.node_id = d.node_id AND g.numa_node = d.numa_node OFFSET 0) g
		WHERE g.ready AND g.shape = $1 AND g.gpu_model = $2 AND g.free < $3 AND g.free + d.free >= $3
		ORDER BY g.free + d.free, g.node_id, g.numa_node `+pageClause(limit, offset), r.Shape, r.GPUModel, r.GPUs)
	return collectCandidates(rows, err, "slice candidates", Candidate{})
}

// NodesWithRoom returns nodes with room for the request across their NUMA
// nodes, the fullest first, up to limit of them after skipping offset.
func NodesWithRoom(ctx context.Context, q store.Querier, r Room, limit, offset int) ([]Candidate, error) {
	rows, err := q.Query(ctx, `SELECT node_id, numa_node FROM slot_groups
		WHERE ready AND numa_node = -1 AND shape = $1 AND gpu_model = $2 AND free >= $3
		ORDER BY free, node_id `+pageClause(limit, offset), r.Shape, r.GPUModel, r.GPUs)
	return collectCandidates(rows, err, "spread candidates", Candidate{})
}

// NodesWithRoomInDeltas returns the nodes that NodesWithRoom leaves out
// but have room once their deltas count.
func NodesWithRoomInDeltas(ctx context.Context, q store.Querier, r Room, limit, offset int) ([]Candidate, error) {
	rows, err := q.Query(ctx, `SELECT g.node_id, g.numa_node
		FROM (SELECT node_id, sum(free) AS free FROM slot_group_deltas WHERE numa_node = -1 GROUP BY node_id) d
		CROSS JOIN LATERAL (SELECT * FROM slot_groups g WHERE g.node_id = d.node_id AND g.numa_node = -1 OFFSET 0) g
		WHERE g.ready AND g.shape = $1 AND g.gpu_model = $2 AND g.free < $3 AND g.free + d.free >= $3
		ORDER BY g.free + d.free, g.node_id `+pageClause(limit, offset), r.Shape, r.GPUModel, r.GPUs)
	return collectCandidates(rows, err, "spread candidates", Candidate{})
}

// WholeNodesFree returns nodes whose every slot is free and that have
// exactly r.GPUs of them, up to limit after skipping offset.
func WholeNodesFree(ctx context.Context, q store.Querier, r Room, limit, offset int) ([]Candidate, error) {
	rows, err := q.Query(ctx, `SELECT node_id, numa_node FROM slot_groups
		WHERE ready AND numa_node = -1 AND shape = $1 AND gpu_model = $2 AND free = $3 AND busy = 0
		ORDER BY node_id `+pageClause(limit, offset), r.Shape, r.GPUModel, r.GPUs)
	return collectCandidates(rows, err, "baremetal candidates", Candidate{Whole: true})
}

// WholeNodesFreeInDeltas returns the nodes that WholeNodesFree leaves out
// but are wholly free once their deltas count.
func WholeNodesFreeInDeltas(ctx context.Context, q store.Querier, r Room, limit, offset int) ([]Candidate, error) {
	rows, err := q.Query(ctx, `SELECT g.node_id, g.numa_node
		FROM (SELECT node_id, sum(free) AS free, sum(busy) AS busy FROM slot_group_deltas
		      WHERE numa_node = -1 GROUP BY node_id) d
		CROSS JOIN LATERAL (SELECT * FROM slot_groups g WHERE g.node_id = d.node_id AND g.numa_node = -1 OFFSET 0) g
		WHERE g.ready AND g.shape = $1 AND g.gpu_model = $2
		  AND NOT (g.free = $3 AND g.busy = 0) AND g.free + d.free = $3 AND g.busy + d.busy = 0
		ORDER BY g.node_id `+pageClause(limit, offset), r.Shape, r.GPUModel, r.GPUs)
	return collectCandidates(rows, err, "baremetal candidates", Candidate{Whole: true})
}

// pageClause is LIMIT and OFFSET written into the statement, so that a
// prepared statement's generic plan is made for a page of candidates, not
// for an unknown limit (which Postgres takes as a tenth of the rows).
func pageClause(limit, offset int) string {
	return fmt.Sprintf(" LIMIT %d OFFSET %d", limit, offset)
}

// collectCandidates reads (node_id, numa_node) rows into candidates like
// proto; numa_node -1 stands for the whole node.
func collectCandidates(rows pgx.Rows, err error, op string, proto Candidate) ([]Candidate, error) {
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Candidate, error) {
		c := proto
		return c, row.Scan(&c.NodeID, &c.NUMA)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// Reserve reserves gpus free slots of candidate c for an allocation,
// inside tx, and returns them; false (and nothing reserved) when c no
// longer has that many. Slots are locked FOR UPDATE SKIP LOCKED, so
// concurrent placements never wait on each other and never double-book,
// in a savepoint: when too few are left the savepoint is rolled back,
// which releases the row locks taken here so other placements can use
// them. Only the slots it will reserve are locked (row locks last until
// the transaction ends, so a lock on a slot it does not take would hide
// that slot from concurrent placements until then).
func Reserve(ctx context.Context, tx pgx.Tx, allocationID string, c Candidate, gpus int) ([]api.Slot, bool, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("savepoint: %w", err)
	}
	defer func() { _ = sp.Rollback(ctx) }() // no-op after commit
	return reserveIn(ctx, sp, allocationID, c, gpus)
}

// Kind is a kind of candidate ReserveClaimed claims.
type Kind int

// The kinds of candidates, as NUMAGroupsWithRoom, NodesWithRoom and
// WholeNodesFree return them.
const (
	NUMAGroup Kind = iota
	SpreadNode
	WholeNode
)

// claimSQL takes the best candidate of a kind whose count row no open
// transaction holds, past the ones given (node_id:numa_node), and locks
// that row.
var claimSQL = map[Kind]string{
	NUMAGroup: `SELECT node_id, numa_node FROM slot_groups
		WHERE ready AND numa_node >= 0 AND shape = $1 AND gpu_model = $2 AND free >= $3
		  AND NOT (node_id || ':' || numa_node = ANY ($4))
		ORDER BY free, node_id, numa_node LIMIT 1 FOR UPDATE SKIP LOCKED`,
	SpreadNode: `SELECT node_id, numa_node FROM slot_groups
		WHERE ready AND numa_node = -1 AND shape = $1 AND gpu_model = $2 AND free >= $3
		  AND NOT (node_id || ':' || numa_node = ANY ($4))
		ORDER BY free, node_id LIMIT 1 FOR UPDATE SKIP LOCKED`,
	WholeNode: `SELECT node_id, numa_node FROM slot_groups
		WHERE ready AND numa_node = -1 AND shape = $1 AND gpu_model = $2 AND free = $3 AND busy = 0
		  AND NOT (node_id || ':' || numa_node = ANY ($4))
		ORDER BY node_id LIMIT 1 FOR UPDATE SKIP LOCKED`,
}

// ReserveClaimed is Reserve on the best candidate of a kind that no
// concurrent placement is reserving in: it claims the candidate's count
// row (FOR UPDATE SKIP LOCKED) so that concurrent placements each go to a
// different one instead of all racing for the slots of the first, and
// count their reservations in the row rather than as deltas. It returns
// the candidate tried, or found false when none is left past the ones in
// tried; a failed attempt keeps no lock, on the row or on slots.
//
// It is one round trip when it succeeds or finds nothing (a savepoint,
// the claim, the slots' locks and their update as one statement, a guard,
// the reserved slots read back, the savepoint released: claimReserveSQL),
// and two when the claimed candidate turned out short (the savepoint is
// then rolled back, which releases what was locked).
func ReserveClaimed(ctx context.Context, tx pgx.Tx, allocationID string, kind Kind, r Room, tried []Candidate) (slots []api.Slot, c Candidate, found, ok bool, err error) {
	skip := make([]string, len(tried))
	for i, t := range tried {
		skip[i] = fmt.Sprintf("%s:%d", t.NodeID, t.NUMA)
	}
	c.Whole = kind == WholeNode
	b := &pgx.Batch{}
	b.Queue(`SAVEPOINT node_claim`)
	b.Queue(`SELECT set_config('gpuaas.place_short', 'false', true)`)
	b.Queue(claimReserveSQL[kind], r.Shape, r.GPUModel, r.GPUs, skip, allocationID).Fn = func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("claim candidate: %w", err)
		}
		var short string
		_, err = pgx.ForEachRow(rows, []any{&c.NodeID, &c.NUMA, &short}, func() error { found = true; return nil })
		if err != nil {
			return fmt.Errorf("claim candidate: %w", err)
		}
		return nil
	}
	b.Queue(placeShortGuardSQL).Fn = func(br pgx.BatchResults) error {
		_, err := br.Exec()
		if store.IsGuardFailure(err) { // short
			return errClaimShort
		}
		return err
	}
	b.Queue(`SELECT `+slotColumns+` FROM slots WHERE allocation_id = $1 AND state = 'reserved' ORDER BY node_id, idx`,
		allocationID).Fn = func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("reserve slots for %s: %w", allocationID, err)
		}
		slots, err = pgx.CollectRows(rows, scanSlot)
		return err
	}
	b.Queue(`RELEASE SAVEPOINT node_claim`)
	err = tx.SendBatch(ctx, b).Close()
	switch {
	case errors.Is(err, errClaimShort):
		// The candidate had too few slots left: give back its row and
		// the slots locked, as a rolled-back savepoint does.
		// One simple-protocol string: a batch would be prepared first,
		// which the aborted transaction refuses.
		if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT node_claim; RELEASE SAVEPOINT node_claim`); err != nil {
			return nil, c, true, false, fmt.Errorf("roll back claim: %w", err)
		}
		return nil, c, true, false, nil
	case err != nil:
		return nil, c, false, false, err
	case !found:
		return nil, c, false, false, nil
	case len(slots) != r.GPUs:
		return nil, c, true, false, fmt.Errorf("reserve slots for %s: %d reserved, want %d", allocationID, len(slots), r.GPUs)
	}
	return slots, c, true, true, nil
}

// errClaimShort is placeShortGuardSQL's refusal: the claimed candidate
// had fewer free slots than asked for.
var errClaimShort = errors.New("claimed candidate is short")

// placeShortGuardSQL fails when claimReserveSQL claimed a candidate and
// reserved nothing in it, so that the rest of the round trip (the read
// back, the savepoint's release) is skipped and the savepoint can be
// rolled back.
const placeShortGuardSQL = `SELECT 1 / (NOT coalesce(current_setting('gpuaas.place_short', true), 'false')::bool)::int`

// slotsToLock are, for each kind, the slots of the claimed candidate (g)
// that a reservation takes, locked FOR UPDATE SKIP LOCKED: reserveIn's
// queries with the candidate read from g.
var slotsToLock = map[Kind]string{
	NUMAGroup: `SELECT id FROM slots WHERE node_id = (SELECT node_id FROM g) AND numa_node = (SELECT numa_node FROM g)
		AND state = 'free' AND quarantined_at IS NULL ORDER BY idx LIMIT $3 FOR UPDATE SKIP LOCKED`,
	SpreadNode: `SELECT s.id FROM slots s
		JOIN (SELECT numa_node, count(*) AS free FROM slots WHERE node_id = (SELECT node_id FROM g) AND state = 'free'
		      AND quarantined_at IS NULL GROUP BY numa_node) f ON f.numa_node = s.numa_node
		WHERE s.node_id = (SELECT node_id FROM g) AND s.state = 'free' AND s.quarantined_at IS NULL
		ORDER BY f.free DESC, s.numa_node, s.idx LIMIT $3 FOR UPDATE OF s SKIP LOCKED`,
	WholeNode: `SELECT id FROM slots WHERE node_id = (SELECT node_id FROM g) AND state = 'free'
		AND NOT EXISTS (SELECT 1 FROM slots b WHERE b.node_id = (SELECT node_id FROM g)
		                AND (b.state IN ('reserved', 'pending') OR b.quarantined_at IS NOT NULL))
		ORDER BY idx FOR UPDATE SKIP LOCKED`,
}

// claimReserveSQL claims a candidate (claimSQL), locks the slots it
// would take (slotsToLock) and, when there are $3 of them, reserves them
// for allocation $5, in one statement; it returns the candidate claimed
// (no row: none left) and sets gpuaas.place_short when it reserved
// nothing there. All of it runs in a savepoint (ReserveClaimed).
var claimReserveSQL = func() map[Kind]string {
	m := map[Kind]string{}
	for k, claim := range claimSQL {
		m[k] = `WITH g AS (` + claim + `), s AS (` + slotsToLock[k] + `),
		u AS (UPDATE slots SET state = 'reserved', allocation_id = $5
		      WHERE id IN (SELECT id FROM s) AND (SELECT count(*) FROM s) = $3 RETURNING id)
		SELECT g.node_id, g.numa_node, set_config('gpuaas.place_short', ((SELECT count(*) FROM u) = 0)::text, true) FROM g`
	}
	return m
}()

// reserveIn is Reserve inside savepoint sp, which it releases on
// success.
func reserveIn(ctx context.Context, sp pgx.Tx, allocationID string, c Candidate, gpus int) ([]api.Slot, bool, error) {
	var rows pgx.Rows
	var err error
	switch {
	case c.Whole:
		// Bare metal takes every slot of the node, and none may be busy
		// (the counts the candidate came from may lag).
		rows, err = sp.Query(ctx, `SELECT id FROM slots WHERE node_id = $1 AND state = 'free'
			AND NOT EXISTS (SELECT 1 FROM slots b WHERE b.node_id = $1
			                AND (b.state IN ('reserved', 'pending') OR b.quarantined_at IS NOT NULL))
			ORDER BY idx FOR UPDATE SKIP LOCKED`, c.NodeID)
	case c.NUMA >= 0:
		rows, err = sp.Query(ctx, `SELECT id FROM slots WHERE node_id = $1 AND numa_node = $2 AND state = 'free'
			AND quarantined_at IS NULL ORDER BY idx LIMIT $3 FOR UPDATE SKIP LOCKED`, c.NodeID, c.NUMA, gpus)
	default:
		// Spread as little as possible: fill from the NUMA nodes with the
		// most free slots first.
		rows, err = sp.Query(ctx, `SELECT s.id FROM slots s
			JOIN (SELECT numa_node, count(*) AS free FROM slots WHERE node_id = $1 AND state = 'free'
			      AND quarantined_at IS NULL GROUP BY numa_node) g ON g.numa_node = s.numa_node
			WHERE s.node_id = $1 AND s.state = 'free' AND s.quarantined_at IS NULL
			ORDER BY g.free DESC, s.numa_node, s.idx LIMIT $2 FOR UPDATE OF s SKIP LOCKED`, c.NodeID, gpus)
	}
	if err != nil {
		return nil, false, fmt.Errorf("lock slots: %w", err)
	}
	chosen, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, false, fmt.Errorf("lock slots: %w", err)
	}
	if len(chosen) != gpus {
		return nil, false, nil
	}
	// The reserved slots come back with the update: no read after it.
	rows, err = sp.Query(ctx, `UPDATE slots SET state = 'reserved', allocation_id = $1 WHERE id = ANY($2)
		RETURNING `+slotColumns, allocationID, chosen)
	if err != nil {
		return nil, false, fmt.Errorf("reserve slots for %s: %w", allocationID, err)
	}
	slots, err := pgx.CollectRows(rows, scanSlot)
	if err != nil {
		return nil, false, fmt.Errorf("reserve slots for %s: %w", allocationID, err)
	}
	if err := sp.Commit(ctx); err != nil {
		return nil, false, fmt.Errorf("release savepoint: %w", err)
	}
	slices.SortFunc(slots, func(a, b api.Slot) int {
		return cmp.Or(cmp.Compare(a.NodeID, b.NodeID), cmp.Compare(a.Index, b.Index))
	})
	return slots, true, nil
}

// FreeSlots returns an allocation's slots to the pool.
func FreeSlots(ctx context.Context, q store.Querier, allocationID string) (int, error) {
	tag, err := q.Exec(ctx, `UPDATE slots SET state = 'free', allocation_id = NULL WHERE allocation_id = $1`, allocationID)
	if err != nil {
		return 0, fmt.Errorf("free slots of %s: %w", allocationID, err)
	}
	return int(tag.RowsAffected()), nil
}

// Availability is what the ready nodes of a shape and GPU model can
// serve now: their count, and how many GPUs are free. A bare-metal node
// is rented whole, so only the GPUs of wholly free nodes count.
func Availability(ctx context.Context, q store.Querier, shape, gpuModel string) (api.SKUAvailability, error) {
	var av api.SKUAvailability
	err := q.QueryRow(ctx, `SELECT count(*),
		coalesce(sum(CASE WHEN $1 = 'baremetal' AND (busy > 0 OR free = 0) THEN 0 ELSE free END), 0)
		FROM (SELECT n.id,
			count(*) FILTER (WHERE s.state = 'free' AND s.quarantined_at IS NULL) AS free,
			count(*) FILTER (WHERE s.state IN ('reserved', 'pending') OR s.quarantined_at IS NOT NULL) AS busy
			FROM nodes n JOIN slots s ON s.node_id = n.id
			WHERE n.state = 'ready' AND n.shape = $1 AND n.gpu_model = $2
			GROUP BY n.id
			HAVING count(*) FILTER (WHERE s.state IN ('free', 'reserved')) > 0) per_node`, shape, gpuModel).Scan(&av.Nodes, &av.FreeGPUs)
	if err != nil {
		return av, fmt.Errorf("availability of %s %s: %w", shape, gpuModel, err)
	}
	return av, nil
}

// CouldServe counts the nodes, in any state, that could ever serve gpus
// GPUs of a shape and GPU model: enough slots that are not disabled. None
// means a queued request waits until an operator adds a host.
func CouldServe(ctx context.Context, q store.Querier, shape, gpuModel string, gpus int) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM (SELECT n.id FROM nodes n JOIN slots s ON s.node_id = n.id
		WHERE n.shape = $1 AND n.gpu_model = $2 AND s.state <> 'disabled'
		GROUP BY n.id HAVING count(*) >= $3) servers`, shape, gpuModel, gpus).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("nodes serving %s %s: %w", shape, gpuModel, err)
	}
	return n, nil
}
