package sched_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/sched"
	"github.com/gpuaas/gpuaas/internal/api"
)

// fourByTwo is a node with 8 slots on 4 NUMA nodes.
var fourByTwo = []int{0, 0, 1, 1, 2, 2, 3, 3}

func TestPlace(t *testing.T) {
	slice, metal := api.ShapeGPUSlice, api.ShapeBaremetal
	tests := []struct {
		name  string
		nodes []nodeSetup
		shape string
		model string // default H200
		gpus  int
		// wantNode is the node placed on; "" means no capacity.
		wantNode string
		// wantNUMA is how many slots land on each NUMA node.
		wantNUMA map[int]int
		// wantFree is each node's free slots per NUMA node afterwards.
		wantFree map[string][]int
	}{
		{name: "1 GPU stays on one NUMA node", nodes: []nodeSetup{{name: "a"}}, shape: slice, gpus: 1,
			wantNode: "a", wantNUMA: map[int]int{0: 1}},
		{name: "2 GPUs on one NUMA node", nodes: []nodeSetup{{name: "a"}}, shape: slice, gpus: 2,
			wantNode: "a", wantNUMA: map[int]int{0: 2}},
		{name: "4 GPUs on one NUMA node", nodes: []nodeSetup{{name: "a"}}, shape: slice, gpus: 4,
			wantNode: "a", wantNUMA: map[int]int{0: 4}},
		{name: "8 GPUs span both NUMA nodes", nodes: []nodeSetup{{name: "a"}}, shape: slice, gpus: 8,
			wantNode: "a", wantNUMA: map[int]int{0: 4, 1: 4}},

		// Best fit: the fullest group that still fits, so whole groups stay whole.
		{name: "2 GPUs go to the half-used group", shape: slice, gpus: 2,
			nodes:    []nodeSetup{{name: "a"}, {name: "b", used: map[int]int{0: 2}}, {name: "c"}},
			wantNode: "b", wantNUMA: map[int]int{0: 2},
			wantFree: map[string][]int{"a": {4, 4}, "b": {0, 4}, "c": {4, 4}}},
		{name: "1 GPU goes to the fullest group", shape: slice, gpus: 1,
			nodes:    []nodeSetup{{name: "a", used: map[int]int{0: 1}}, {name: "b", used: map[int]int{1: 2}}},
			wantNode: "b", wantNUMA: map[int]int{1: 1},
			wantFree: map[string][]int{"a": {3, 4}, "b": {4, 1}}},
		{name: "4 GPUs skip groups that are too small", shape: slice, gpus: 4,
			nodes:    []nodeSetup{{name: "a", used: map[int]int{0: 1, 1: 2}}, {name: "b", used: map[int]int{0: 1}}},
			wantNode: "b", wantNUMA: map[int]int{1: 4},
			wantFree: map[string][]int{"a": {3, 2}, "b": {3, 0}}},
		{name: "one NUMA node on an empty node beats spreading on a fuller one", shape: slice, gpus: 4,
			nodes:    []nodeSetup{{name: "a", used: map[int]int{0: 2, 1: 1}}, {name: "b"}},
			wantNode: "b", wantNUMA: map[int]int{0: 4}},

		// Fits only across NUMA nodes: spread over as few as possible.
		{name: "spread takes the biggest groups", shape: slice, gpus: 4,
			nodes:    []nodeSetup{{name: "x", numa: fourByTwo, used: map[int]int{0: 1, 1: 1}}},
			wantNode: "x", wantNUMA: map[int]int{2: 2, 3: 2},
			wantFree: map[string][]int{"x": {1, 1, 0, 0}}},
		{name: "spread fills the larger group first", shape: slice, gpus: 4,
			nodes:    []nodeSetup{{name: "x", used: map[int]int{0: 2, 1: 1}}},
			wantNode: "x", wantNUMA: map[int]int{1: 3, 0: 1}},
		{name: "spread goes to the fullest node", shape: slice, gpus: 4,
			nodes: []nodeSetup{
				{name: "x", used: map[int]int{0: 1, 1: 1}}, // 3+3 free
				{name: "y", used: map[int]int{0: 2, 1: 1}}, // 2+3 free
			},
			wantNode: "y", wantNUMA: map[int]int{1: 3, 0: 1}},
		{name: "no single node has room", shape: slice, gpus: 8,
			nodes: []nodeSetup{{name: "x", used: map[int]int{0: 1}}, {name: "y", used: map[int]int{1: 1}}}},

		// Bare metal: a whole node, only when every slot of it is free.
		{name: "baremetal takes a whole free node", shape: metal, model: "H100", gpus: 8,
			nodes:    []nodeSetup{{name: "m", shape: metal, model: "H100"}},
			wantNode: "m", wantNUMA: map[int]int{0: 4, 1: 4}, wantFree: map[string][]int{"m": {0, 0}}},
		{name: "baremetal skips a node with a used slot", shape: metal, model: "H100", gpus: 8,
			nodes:    []nodeSetup{{name: "m1", shape: metal, model: "H100", used: map[int]int{1: 1}}, {name: "m2", shape: metal, model: "H100"}},
			wantNode: "m2", wantNUMA: map[int]int{0: 4, 1: 4}, wantFree: map[string][]int{"m1": {4, 3}}},
		{name: "baremetal skips a node with a pending slot", shape: metal, model: "H100", gpus: 8,
			nodes:    []nodeSetup{{name: "m1", shape: metal, model: "H100", pending: []int{7}}, {name: "m2", shape: metal, model: "H100"}},
			wantNode: "m2", wantNUMA: map[int]int{0: 4, 1: 4}},
		{name: "baremetal skips a node with a disabled slot", shape: metal, model: "H100", gpus: 8,
			nodes: []nodeSetup{{name: "m1", shape: metal, model: "H100", disabled: []int{0}}}},
		{name: "baremetal never takes a slice node", shape: metal, model: "H100", gpus: 8,
			nodes: []nodeSetup{{name: "s", model: "H100"}}},
		{name: "slices never land on baremetal nodes", shape: slice, model: "H100", gpus: 1,
			nodes: []nodeSetup{{name: "m", shape: metal, model: "H100"}}},
		{name: "baremetal skips a draining node", shape: metal, model: "H100", gpus: 8,
			nodes: []nodeSetup{{name: "m", shape: metal, model: "H100", state: api.NodeDraining}}},

		// Nodes and slots that are not in service.
		{name: "draining node is not used", shape: slice, gpus: 1,
			nodes: []nodeSetup{{name: "a", state: api.NodeDraining}}},
		{name: "down node is not used", shape: slice, gpus: 1,
			nodes: []nodeSetup{{name: "a", state: api.NodeDown}}},
		{name: "draining node is not used even when it fits best", shape: slice, gpus: 1,
			nodes:    []nodeSetup{{name: "a", state: api.NodeDraining, used: map[int]int{0: 3}}, {name: "b"}},
			wantNode: "b", wantNUMA: map[int]int{0: 1}, wantFree: map[string][]int{"a": {1, 4}}},
		{name: "pending slots are not used", shape: slice, gpus: 1,
			nodes:    []nodeSetup{{name: "a", pending: []int{0, 1, 2}}},
			wantNode: "a", wantNUMA: map[int]int{0: 1}, wantFree: map[string][]int{"a": {0, 4}}},
		{name: "pending slots do not count towards a group", shape: slice, gpus: 4,
			nodes:    []nodeSetup{{name: "a", pending: []int{0}}},
			wantNode: "a", wantNUMA: map[int]int{1: 4}},
		{name: "pending and disabled slots do not count towards a spread", shape: slice, gpus: 8,
			nodes: []nodeSetup{{name: "a", pending: []int{0}}, {name: "b", disabled: []int{7}}}},
		{name: "other GPU model is not used", shape: slice, gpus: 1,
			nodes: []nodeSetup{{name: "a", model: "H100"}}},
		{name: "no nodes at all", shape: slice, gpus: 1},
		{name: "full fleet", shape: slice, gpus: 1,
			nodes: []nodeSetup{{name: "a", used: map[int]int{0: 4, 1: 4}}}},
	}
	d := newDB(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx, err := d.pool.Begin(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(context.Background()) }()
			f := d.fleet(t, tx, tt.nodes...)
			model := tt.model
			if model == "" {
				model = "H200"
			}
			reservedBefore := f.count(t, `SELECT count(*) FROM slots WHERE state = 'reserved'`)
			r, p, err := f.place(t, tt.shape, model, tt.gpus)
			if tt.wantNode == "" {
				if !errors.Is(err, api.ErrNoCapacity) || !sched.IsNoCapacity(err) {
					t.Fatalf("got placement on %q, error %v; want no_capacity", f.name[p.NodeID], err)
				}
				if got := f.count(t, `SELECT count(*) FROM slots WHERE state = 'reserved'`); got != reservedBefore {
					t.Errorf("reserved slots got %d after no_capacity; want %d as before", got, reservedBefore)
				}
			} else {
				if err != nil {
					t.Fatalf("got %v; want a placement on %s", err, tt.wantNode)
				}
				if got := f.name[p.NodeID]; got != tt.wantNode {
					t.Errorf("node got %s; want %s", got, tt.wantNode)
				}
				if got := numaCounts(p.Slots); !maps.Equal(got, tt.wantNUMA) {
					t.Errorf("slots per NUMA node got %v; want %v", got, tt.wantNUMA)
				}
				f.checkReserved(t, r, p)
			}
			for name, want := range tt.wantFree {
				if got := f.freePerNUMA(t, name); !slices.Equal(got, want) {
					t.Errorf("free slots per NUMA node of %s got %v; want %v", name, got, want)
				}
			}
		})
	}
}

func TestPlaceInvalidRequest(t *testing.T) {
	f := newFleet(t, nodeSetup{name: "a"})
	tests := []struct {
		name  string
		shape string
		gpus  int
	}{
		{"zero gpus", api.ShapeGPUSlice, 0},
		{"negative gpus", api.ShapeGPUSlice, -1},
		{"unknown shape", "container", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := f.place(t, tt.shape, "H200", tt.gpus); !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("got %v; want invalid_argument", err)
			}
		})
	}
	if n := f.count(t, `SELECT count(*) FROM slots WHERE state = 'reserved'`); n != 0 {
		t.Errorf("reserved slots got %d; want 0", n)
	}
}

// TestPlaceRepeatedlyFillsFleet places 1-GPU slices until nothing is left:
// every slot is used exactly once and the last request gets no_capacity.
func TestPlaceRepeatedlyFillsFleet(t *testing.T) {
	f := newFleet(t, nodeSetup{name: "a"}, nodeSetup{name: "b", numa: fourByTwo, pending: []int{5}})
	seen := map[string]string{}
	for i := range 15 {
		r, p, err := f.place(t, api.ShapeGPUSlice, "H200", 1)
		if err != nil {
			t.Fatalf("placement %d got %v; want a slot", i, err)
		}
		if prev, dup := seen[p.Slots[0].ID]; dup {
			t.Fatalf("slot %s given to %s and %s", p.Slots[0].ID, prev, r.AllocationID)
		}
		seen[p.Slots[0].ID] = r.AllocationID
	}
	if _, _, err := f.place(t, api.ShapeGPUSlice, "H200", 1); !errors.Is(err, api.ErrNoCapacity) {
		t.Fatalf("16th placement got %v; want no_capacity", err)
	}
}

func TestFreeSlots(t *testing.T) {
	f := newFleet(t, nodeSetup{name: "a"})
	r, _, err := f.place(t, api.ShapeGPUSlice, "H200", 4)
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.FreeSlots(context.Background(), f.pool, r.AllocationID)
	if err != nil || n != 4 {
		t.Fatalf("FreeSlots got %d, %v; want 4, nil", n, err)
	}
	if got := f.freePerNUMA(t, "a"); !slices.Equal(got, []int{4, 4}) {
		t.Errorf("free slots per NUMA node got %v; want [4 4]", got)
	}
	if n, err := node.FreeSlots(context.Background(), f.pool, r.AllocationID); err != nil || n != 0 {
		t.Errorf("second FreeSlots got %d, %v; want 0, nil", n, err)
	}
}
