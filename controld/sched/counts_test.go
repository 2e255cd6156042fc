package sched_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/sched"
	"github.com/gpuaas/gpuaas/internal/api"
)

// checkCounts fails unless slot_groups plus its committed deltas says
// exactly what the slots and nodes say: free and busy slots per NUMA
// group and per node, and each node's shape, GPU model and readiness.
func (f *fleet) checkCounts(t *testing.T) {
	t.Helper()
	rows, err := f.q.Query(context.Background(), `WITH want AS (
			SELECT s.node_id, coalesce(s.numa_node, -1) AS numa_node,
			       count(*) FILTER (WHERE s.state = 'free' AND s.quarantined_at IS NULL) AS free,
			       count(*) FILTER (WHERE s.state IN ('reserved', 'pending')) AS busy,
			       n.shape, n.gpu_model, n.state = 'ready' AS ready
			FROM slots s JOIN nodes n ON n.id = s.node_id
			GROUP BY GROUPING SETS ((s.node_id, s.numa_node, n.shape, n.gpu_model, n.state),
			                        (s.node_id, n.shape, n.gpu_model, n.state))
		), have AS (
			SELECT g.node_id, g.numa_node, g.free + coalesce(sum(d.free), 0) AS free,
			       g.busy + coalesce(sum(d.busy), 0) AS busy, g.shape, g.gpu_model, g.ready
			FROM slot_groups g LEFT JOIN slot_group_deltas d ON d.node_id = g.node_id AND d.numa_node = g.numa_node
			GROUP BY g.node_id, g.numa_node
		)
		SELECT coalesce(w.node_id, h.node_id) || '/' || coalesce(w.numa_node, h.numa_node)
		       || ': free ' || coalesce(h.free, 0) || ' busy ' || coalesce(h.busy, 0)
		       || ' want ' || coalesce(w.free, 0) || ' ' || coalesce(w.busy, 0)
		       || ' (' || coalesce(h.shape || ' ' || h.gpu_model || ' ' || h.ready, 'no row')
		       || ' want ' || coalesce(w.shape || ' ' || w.gpu_model || ' ' || w.ready, 'no slots') || ')'
		FROM want w FULL JOIN have h ON h.node_id = w.node_id AND h.numa_node = w.numa_node
		WHERE coalesce(h.free, 0) <> coalesce(w.free, 0) OR coalesce(h.busy, 0) <> coalesce(w.busy, 0)
		   OR (w.node_id IS NOT NULL AND (h.node_id IS NULL OR h.shape <> w.shape
		       OR h.gpu_model <> w.gpu_model OR h.ready <> w.ready))`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		t.Errorf("slot counts: %s", s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestSlotCountsFollowSlots changes slots and nodes every way controld
// does and checks the counts placement reads after each step.
func TestSlotCountsFollowSlots(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t,
		nodeSetup{name: "a", used: map[int]int{0: 1, 1: 3}},
		nodeSetup{name: "b", pending: []int{0, 5}, disabled: []int{7}},
		nodeSetup{name: "c", shape: api.ShapeBaremetal, state: "down"},
		nodeSetup{name: "d", numa: fourByTwo, used: map[int]int{2: 1}})
	f.checkCounts(t)

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"place", func(t *testing.T) {
			if _, _, err := f.place(t, api.ShapeGPUSlice, "H200", 3); err != nil {
				t.Fatal(err)
			}
		}},
		{"free", func(t *testing.T) {
			if _, err := node.FreeSlots(ctx, f.q, f.filler); err != nil {
				t.Fatal(err)
			}
		}},
		{"approve", func(t *testing.T) {
			if _, err := node.ApproveSlots(ctx, f.q, f.nodeID["b"], nil); err != nil {
				t.Fatal(err)
			}
		}},
		{"discovery", func(t *testing.T) {
			r := api.TopologyResult{GPUs: []api.GPUInfo{{Model: "H100"}},
				CandidateSlots: []api.CandidateSlot{{GPUPCI: "0000:99:00.0", NUMANode: 1}}}
			if err := node.ApplyDiscovery(ctx, f.q, f.nodeID["b"], r, true, time.Now()); err != nil {
				t.Fatal(err)
			}
		}},
		{"drain", func(t *testing.T) {
			if err := node.Drain(ctx, f.q, f.nodeID["a"], time.Now()); err != nil {
				t.Fatal(err)
			}
		}},
		{"node ready again", func(t *testing.T) {
			f.exec(t, `UPDATE nodes SET state = 'ready' WHERE id = $1`, f.nodeID["c"])
		}},
		{"gpu model", func(t *testing.T) {
			f.exec(t, `UPDATE nodes SET gpu_model = 'B200' WHERE id = $1`, f.nodeID["d"])
		}},
		{"slot deleted", func(t *testing.T) {
			f.exec(t, `UPDATE slots SET state = 'pending' WHERE node_id = $1 AND idx = 0`, f.nodeID["d"])
			f.exec(t, `DELETE FROM slots WHERE node_id = $1 AND state = 'pending'`, f.nodeID["d"])
		}},
		{"bare metal", func(t *testing.T) {
			if _, _, err := f.place(t, api.ShapeBaremetal, "H200", 8); err != nil {
				t.Fatal(err)
			}
		}},
		{"quarantine a free slot", func(t *testing.T) {
			if _, _, err := node.Quarantine(ctx, f.q, f.nodeID["b"], node.SlotSelector{Index: new(int)}, "xid 79", "test", time.Now()); err != nil {
				t.Fatal(err)
			}
		}},
		{"quarantine a reserved slot", func(t *testing.T) {
			one := 1
			if _, _, err := node.Quarantine(ctx, f.q, f.nodeID["a"], node.SlotSelector{Index: &one}, "ecc", "test", time.Now()); err != nil {
				t.Fatal(err)
			}
		}},
		{"free a quarantined slot", func(t *testing.T) {
			f.exec(t, `UPDATE slots SET state = 'free', allocation_id = NULL WHERE node_id = $1 AND idx = 1`, f.nodeID["a"])
		}},
		{"clear", func(t *testing.T) {
			if _, err := node.ClearQuarantine(ctx, f.q, f.nodeID["a"], node.SlotSelector{}); err != nil {
				t.Fatal(err)
			}
			if _, err := node.ClearQuarantine(ctx, f.q, f.nodeID["b"], node.SlotSelector{}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.run(t)
			f.checkCounts(t)
		})
	}
}

// TestSlotCountsOfConcurrentPlacements: placements that share a group
// while both are open neither wait for each other nor lose a count (the
// second records a delta), and the next change folds the deltas in.
func TestSlotCountsOfConcurrentPlacements(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, nodeSetup{name: "a", used: map[int]int{1: 4}})
	held, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Rollback(ctx) }()
	if _, err := sched.Place(ctx, held, sched.Request{AllocationID: f.newAlloc(t), Shape: api.ShapeGPUSlice, GPUModel: "H200", GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.place(t, api.ShapeGPUSlice, "H200", 2); err != nil {
		t.Fatalf("placement beside an open one got %v; want slots", err)
	}
	if got := f.count(t, `SELECT count(*) FROM slot_group_deltas`); got == 0 {
		t.Errorf("deltas got %d; want the second placement's (its count rows were held)", got)
	}
	if err := held.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	f.checkCounts(t)
	if _, _, err := f.place(t, api.ShapeGPUSlice, "H200", 1); err != nil {
		t.Fatalf("placement of the last slot got %v", err)
	}
	f.checkCounts(t)
	if got := f.count(t, `SELECT count(*) FROM slot_group_deltas`); got != 0 {
		t.Errorf("deltas after the next change got %d; want 0 (folded)", got)
	}
	if _, _, err := f.place(t, api.ShapeGPUSlice, "H200", 1); !errors.Is(err, api.ErrNoCapacity) {
		t.Errorf("placement on a full fleet got %v; want no_capacity", err)
	}
}

// TestPlacementFindsRoomOnlyInDeltas: slots freed while an open
// transaction held their count rows show in the deltas alone until the
// next change of those rows, and a placement must still find them
// (regression guard: with counts read from the index alone the request
// got no_capacity while the node had room).
func TestPlacementFindsRoomOnlyInDeltas(t *testing.T) {
	tests := []struct {
		name  string
		shape string
		gpus  int
		used  map[int]int // slots of the one node reserved, then freed
	}{
		{name: "NUMA group", shape: api.ShapeGPUSlice, gpus: 3, used: map[int]int{0: 3, 1: 4}},
		{name: "spread", shape: api.ShapeGPUSlice, gpus: 6, used: map[int]int{0: 3, 1: 4}},
		{name: "bare metal", shape: api.ShapeBaremetal, gpus: 8, used: map[int]int{0: 3, 1: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := newFleet(t, nodeSetup{name: "a", shape: tt.shape, used: tt.used})
			held, err := f.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = held.Rollback(ctx) }()
			// An open transaction holds the node's count rows (as one
			// changing its slots would)...
			if _, err := held.Exec(ctx, `SELECT 1 FROM slot_groups WHERE node_id = $1 FOR UPDATE`, f.nodeID["a"]); err != nil {
				t.Fatal(err)
			}
			// ...while the used slots are freed, then gives them up.
			if _, err := node.FreeSlots(ctx, f.pool, f.filler); err != nil {
				t.Fatal(err)
			}
			if err := held.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if got := f.count(t, `SELECT count(*) FROM slot_group_deltas`); got == 0 {
				t.Fatalf("deltas got %d; want the freed slots'", got)
			}
			f.checkCounts(t)
			r, p, err := f.place(t, tt.shape, "H200", tt.gpus)
			if err != nil {
				t.Fatalf("placement of %d GPUs got %v; want the slots freed", tt.gpus, err)
			}
			f.checkReserved(t, r, p)
			f.checkCounts(t)
		})
	}
}

// TestConcurrentPlacementsClaimDifferentGroups: a placement made while
// another is open goes to a group the other does not hold, when there is
// one, and counts itself in that group's row. (Regression: every
// concurrent placement tried the same best-fit group first, so under 32
// at once most attempts failed on its locked slots, and the reservations
// that did land there were counted as deltas that nothing folded once the
// group was full: groups that looked free but were not piled up at the
// head of the list, and BenchmarkPlacementThroughput fell to ~70/s.)
func TestConcurrentPlacementsClaimDifferentGroups(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, nodeSetup{name: "a", used: map[int]int{1: 4}}, nodeSetup{name: "b", used: map[int]int{1: 4}})
	held, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Rollback(ctx) }()
	r1 := sched.Request{AllocationID: f.newAlloc(t), Shape: api.ShapeGPUSlice, GPUModel: "H200", GPUs: 1}
	p1, err := sched.Place(ctx, held, r1)
	if err != nil {
		t.Fatal(err)
	}
	r2, p2, err := f.place(t, api.ShapeGPUSlice, "H200", 1)
	if err != nil {
		t.Fatalf("placement beside an open one got %v; want slots", err)
	}
	if p2.NodeID == p1.NodeID {
		t.Errorf("second placement got node %s; want the other node (the open placement holds %s's group)",
			f.name[p2.NodeID], f.name[p1.NodeID])
	}
	if err := held.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.count(t, `SELECT count(*) FROM slot_group_deltas`); got != 0 {
		t.Errorf("deltas got %d; want 0 (each placement counted in the row it claimed)", got)
	}
	f.checkReserved(t, r1, p1)
	f.checkReserved(t, r2, p2)
	f.checkCounts(t)
}
