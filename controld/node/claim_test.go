package node_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestReserveClaimedShortGivesBackWhatItLocked: ReserveClaimed claims a
// candidate, locks its slots and reserves them in one round trip
// (claimReserveSQL); when the claimed candidate turns out short — here
// one of its two free slots is locked by another transaction — it
// reports the candidate tried and nothing reserved, and its savepoint is
// rolled back: the candidate's count row and the slot it did lock are
// free for others at once, while its transaction goes on (the next
// attempt, past that candidate, finds none).
func TestReserveClaimedShortGivesBackWhatItLocked(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	n := slicedNode(t, pool, "gpu-1", 2)
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, `SELECT 1 FROM slots WHERE node_id = $1 AND idx = 0 FOR UPDATE`, n.ID); err != nil {
		t.Fatal(err)
	}
	room := node.Room{Shape: api.ShapeGPUSlice, GPUModel: "H200", GPUs: 2}
	err = inTx(pool, func(tx pgx.Tx) error {
		slots, c, found, ok, err := node.ReserveClaimed(ctx, tx, "a-none", node.NUMAGroup, room, nil)
		if err != nil {
			return err
		}
		if !found || ok || len(slots) != 0 || c.NodeID != n.ID || c.NUMA != 0 {
			t.Fatalf("short candidate: got %v, %+v, found %v, ok %v; want %s:0 tried, nothing reserved", slots, c, found, ok, n.ID)
		}
		// Another session can lock what the attempt locked, without
		// waiting: the savepoint's rollback released it.
		other, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = other.Rollback(ctx) }()
		for _, sql := range []string{
			`SELECT 1 FROM slot_groups WHERE node_id = $1 AND numa_node = 0 FOR UPDATE NOWAIT`,
			`SELECT 1 FROM slots WHERE node_id = $1 AND idx = 1 FOR UPDATE NOWAIT`,
		} {
			if _, err := other.Exec(ctx, sql, n.ID); err != nil {
				t.Errorf("%s: %v; want it free", sql, err)
			}
		}
		_, _, found, ok, err = node.ReserveClaimed(ctx, tx, "a-none", node.NUMAGroup, room, []node.Candidate{c})
		if err != nil || found || ok {
			t.Errorf("past the short candidate: found %v, ok %v, %v; want none left", found, ok, err)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := storetest.Count(t, pool, `SELECT count(*) FROM slots WHERE state = 'reserved'`); got != 0 {
		t.Errorf("reserved slots: %d; want 0", got)
	}
}
