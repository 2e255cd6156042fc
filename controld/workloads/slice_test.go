package workloads_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestRunOnASlice: a slice allocation runs workloads (inside its guest,
// docs/apps.md "Slices"): app.run queues a workload.start on the slice's
// node as its user, with its slots' GPUs in slot order — all of them, or
// the first --gpus — and never another slice's on the node; more than
// the slice has is refused.
func TestRunOnASlice(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	slice := w.allocation(t, api.AllocActive, api.ShapeGPUSlice)
	other := w.allocation(t, api.AllocActive, api.ShapeGPUSlice)
	w.slots(t, other, 0)
	w.slots(t, slice, 1, 2)
	for _, tt := range []struct {
		name string
		gpus int
		want []string
	}{
		{"all of the slice's", 0, []string{pci(1), pci(2)}},
		{"its first", 1, []string{pci(1)}},
	} {
		wl, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: slice, Name: tt.name[:3], GPUs: tt.gpus})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		_, typ, raw := w.currentTask(t, wl.ID)
		var p hostproto.WorkloadStartParams
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		if typ != api.TaskWorkloadStart || p.AllocationID != slice || p.PosixUser != api.PosixUser(slice) || !slices.Equal(p.GPUs, tt.want) {
			t.Errorf("%s: task %s %+v; want a start as the slice's user with GPUs %v", tt.name, typ, p, tt.want)
		}
	}
	if _, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: slice, GPUs: 3}); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Errorf("3 GPUs of a 2-GPU slice: %v; want invalid argument", err)
	}
}

// TestReleaseStopsAWorkloadSeenExited: a slice's release stops its
// containers in the guest before removing them, so a status in between
// reports the container exited (SIGKILL: 137): once the allocation is
// going, that ends the workload as stopped by the release, not failed.
func TestReleaseStopsAWorkloadSeenExited(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	slice := w.allocation(t, api.AllocActive, api.ShapeGPUSlice)
	wl, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: slice})
	if err != nil {
		t.Fatal(err)
	}
	taskID, typ, _ := w.currentTask(t, wl.ID)
	w.settle(t, taskID, typ, reported(t, hostproto.WorkloadReport{WorkloadID: wl.ID, State: api.ContainerRunning}))
	if _, err := w.pool.Exec(context.Background(), `UPDATE allocations SET state = 'releasing' WHERE id = $1`, slice); err != nil {
		t.Fatal(err)
	}
	statusID, typ, _ := w.currentTask(t, wl.ID)
	w.settle(t, statusID, typ, reported(t, hostproto.WorkloadReport{WorkloadID: wl.ID, State: api.ContainerExited, ExitCode: 137}))
	if got := w.get(t, wl.ID); got.State != api.WorkloadStopped || got.Reason != "its allocation was released" {
		t.Errorf("after the release stopped it: %+v; want stopped with the reason", got)
	}
}
