package tasks_test

import (
	"slices"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestVMProvisionReportsDriverCheck: a sim guest (which boots no image
// and writes no marker) has its nvidia-smi -L run by hostd over SSH with
// the per-VM key; vm_provision's result carries the UUIDs it listed,
// which are the slots' GPUs as discovery recorded them.
func TestVMProvisionReportsDriverCheck(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H200Slice8())
	res, _, err := run(t, env, api.TaskTopologyDiscover, hostproto.TopologyDiscoverParams{Shape: api.ShapeGPUSlice})
	if err != nil {
		t.Fatal(err)
	}
	s := slots(t, env)[:2]
	var want []string
	for i, c := range res.(api.TopologyResult).CandidateSlots[:2] {
		s[i].GPUUUID = c.GPUUUID
		want = append(want, c.GPUUUID)
	}
	out, rec, err := run(t, env, api.TaskVMProvision, provisionParams(h, "a-check", s))
	if err != nil {
		t.Fatalf("vm_provision: %v (%v)", err, rec)
	}
	c := out.(hostproto.VMProvisionResult).DriverCheck
	if c == nil || !c.Passed || !slices.Equal(c.UUIDs, want) {
		t.Errorf("driver check = %+v; want passed with %v", c, want)
	}
	if _, _, err := run(t, env, api.TaskVMRelease, hostproto.VMReleaseParams{AllocationID: "a-check", Slots: s}); err != nil {
		t.Fatal(err)
	}
}

// TestParseGPUInventory: nvidia-smi's "bus id, uuid" lines by sysfs
// address; anything else is skipped.
func TestParseGPUInventory(t *testing.T) {
	got := tasks.ParseGPUInventory([]byte("00000000:18:00.0, GPU-a\n00000000:2A:00.0, GPU-b\nNo devices were found\n0000:3b:00.0, not-a-uuid\n"))
	if len(got) != 2 || got["0000:18:00.0"] != "GPU-a" || got["0000:2a:00.0"] != "GPU-b" {
		t.Errorf("got %v", got)
	}
}
