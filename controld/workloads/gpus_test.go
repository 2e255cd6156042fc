package workloads_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// slots reserves the node's slots idx (PCI 0000:<idx+10>:00.0) for
// allocation allocID ("" leaves them free).
func (w *world) slots(t *testing.T, allocID string, idx ...int) {
	t.Helper()
	state := "reserved"
	var owner any = allocID
	if allocID == "" {
		state, owner = "free", nil
	}
	for _, i := range idx {
		if _, err := w.pool.Exec(context.Background(), `INSERT INTO slots (id, node_id, idx, gpu_pci, numa_node, state, allocation_id)
			VALUES ($1, 'n-1', $2, $3, 0, $4, $5)`, ids.New(ids.Slot), i, pci(i), state, owner); err != nil {
			t.Fatal(err)
		}
	}
}

func pci(idx int) string { return fmt.Sprintf("0000:%02x:00.0", idx+0x10) }

func (w *world) startGPUs(t *testing.T, wl api.Workload) []string {
	t.Helper()
	_, _, raw := w.currentTask(t, wl.ID)
	var p hostproto.WorkloadStartParams
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	return p.GPUs
}

// TestStartNamesTheAllocationsGPUs: on a node whose slots are shared by
// two allocations (and one free), workload.start names exactly the
// running allocation's GPUs in slot order, or its first N with a count;
// a count above what it has, or below 0, is refused naming gpus and
// writes nothing (docs/apps.md, "GPUs").
func TestStartNamesTheAllocationsGPUs(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	other := w.allocation(t, api.AllocActive, api.ShapeBaremetal)
	w.slots(t, w.allocID, 5, 0, 2)
	w.slots(t, other, 1, 3)
	w.slots(t, "", 4)

	all, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "all"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(w.startGPUs(t, all), ","), strings.Join([]string{pci(0), pci(2), pci(5)}, ","); got != want {
		t.Errorf("all GPUs: %s; want %s", got, want)
	}
	two, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "two", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(w.startGPUs(t, two), ","), pci(0)+","+pci(2); got != want {
		t.Errorf("2 GPUs: %s; want %s", got, want)
	}
	theirs, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: other, Name: "theirs"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(w.startGPUs(t, theirs), ","), pci(1)+","+pci(3); got != want {
		t.Errorf("the other allocation's: %s; want %s", got, want)
	}
	for _, n := range []int{4, 9, -1} {
		before := w.count(t, `SELECT count(*) FROM workloads`) + w.count(t, `SELECT count(*) FROM node_tasks`)
		_, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "many", GPUs: n})
		if api.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), "gpus") {
			t.Errorf("gpus %d: %v; want invalid_argument naming gpus", n, err)
		}
		if after := w.count(t, `SELECT count(*) FROM workloads`) + w.count(t, `SELECT count(*) FROM node_tasks`); after != before {
			t.Errorf("gpus %d: wrote %d rows", n, after-before)
		}
	}
}
