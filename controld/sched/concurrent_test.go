package sched_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gpuaas/gpuaas/controld/sched"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestPlacementLocksOnlyTheSlotsItTakes holds one placement's transaction
// open while a second placement runs: the second must find the slots the
// first did not take. (Regression: the reservation — sched's tryReserve
// then, node.Reserve now — locked every free slot of the group or node it
// tried, so until the first transaction ended a concurrent request saw the
// rest as taken and got no_capacity.)
func TestPlacementLocksOnlyTheSlotsItTakes(t *testing.T) {
	tests := []struct {
		name          string
		node          nodeSetup
		first, second int // GPUs
		wantNUMA      map[int]int
	}{
		{name: "same NUMA group", node: nodeSetup{name: "a", used: map[int]int{1: 4}},
			first: 1, second: 1, wantNUMA: map[int]int{0: 1}},
		{name: "same NUMA group, 2 GPUs", node: nodeSetup{name: "a", used: map[int]int{1: 4}},
			first: 2, second: 2, wantNUMA: map[int]int{0: 2}},
		{name: "after a spread", node: nodeSetup{name: "a", used: map[int]int{0: 2, 1: 1}},
			first: 4, second: 1, wantNUMA: map[int]int{0: 1}},
		{name: "spread after a spread", node: nodeSetup{name: "x", numa: fourByTwo, used: map[int]int{0: 1}},
			first: 3, second: 4, wantNUMA: map[int]int{0: 1, 2: 1, 3: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := newFleet(t, tt.node)
			held, err := f.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = held.Rollback(ctx) }()
			r1 := sched.Request{AllocationID: f.newAlloc(t), Shape: api.ShapeGPUSlice, GPUModel: "H200", GPUs: tt.first}
			p1, err := sched.Place(ctx, held, r1)
			if err != nil {
				t.Fatalf("first placement got %v; want slots", err)
			}

			r2, p2, err := f.place(t, api.ShapeGPUSlice, "H200", tt.second)
			if err != nil {
				t.Fatalf("second placement while the first is open got %v; want the slots it left free", err)
			}
			if got := numaCounts(p2.Slots); !mapsEqual(got, tt.wantNUMA) {
				t.Errorf("second placement slots per NUMA node got %v; want %v", got, tt.wantNUMA)
			}
			if err := held.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			f.checkReserved(t, r1, p1)
			f.checkReserved(t, r2, p2)
		})
	}
}

// TestFailedAttemptLeavesNoLocks: a placement that finds too few unlocked
// slots in a group rolls its attempt back, so a third placement can use
// the slot it had locked while its transaction is still open.
func TestFailedAttemptLeavesNoLocks(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, nodeSetup{name: "a", used: map[int]int{1: 4}})
	first, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Rollback(ctx) }()
	if _, err := sched.Place(ctx, first, sched.Request{AllocationID: f.newAlloc(t), Shape: api.ShapeGPUSlice, GPUModel: "H200", GPUs: 3}); err != nil {
		t.Fatal(err)
	}
	second, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = second.Rollback(ctx) }()
	_, err = sched.Place(ctx, second, sched.Request{AllocationID: f.newAlloc(t), Shape: api.ShapeGPUSlice, GPUModel: "H200", GPUs: 2})
	if !errors.Is(err, api.ErrNoCapacity) {
		t.Fatalf("second placement got %v; want no_capacity (one slot is left)", err)
	}
	if _, p, err := f.place(t, api.ShapeGPUSlice, "H200", 1); err != nil || len(p.Slots) != 1 {
		t.Fatalf("third placement got %v; want the last slot", err)
	}
}

func mapsEqual(a, b map[int]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestPlacementLooksPastLockedCandidates holds more open placements than
// one page of candidates (32): the next placement must still find the
// free slots further down the list. (Regression: candidates were capped
// at 32 with no next page, so with N controld replicas placing at once a
// request got no_capacity while most of the fleet was free.)
func TestPlacementLooksPastLockedCandidates(t *testing.T) {
	const held, spare = 34, 6
	nodes := make([]nodeSetup, held+spare)
	for i := range nodes {
		// One free slot per node, so every candidate holds one placement.
		nodes[i] = nodeSetup{name: fmt.Sprintf("n%02d", i), used: map[int]int{0: 4, 1: 3}}
	}
	f := newFleet(t, nodes...)
	ctx := context.Background()
	for i := range held {
		tx, err := f.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		r := sched.Request{AllocationID: f.newAlloc(t), Shape: api.ShapeGPUSlice, GPUModel: "H200", GPUs: 1}
		if _, err := sched.Place(ctx, tx, r); err != nil {
			t.Fatalf("open placement %d got %v; want a slot (%d are free)", i, err, held+spare-i)
		}
	}
	for i := range spare {
		if _, _, err := f.place(t, api.ShapeGPUSlice, "H200", 1); err != nil {
			t.Fatalf("placement %d beside %d open ones got %v; want one of the %d slots nobody holds", i, held, err, spare-i)
		}
	}
	if _, _, err := f.place(t, api.ShapeGPUSlice, "H200", 1); !errors.Is(err, api.ErrNoCapacity) {
		t.Fatalf("placement with every slot taken or held got %v; want no_capacity", err)
	}
}
