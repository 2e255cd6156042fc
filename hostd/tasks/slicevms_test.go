package tasks_test

import (
	"os"
	"slices"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestSliceVMsFollowHostdevOrder: SliceVMs names each provisioned VM's
// POSIX user and its GPUs in the order the domain got them as hostdevs
// (what hostd's guest telemetry maps guest GPUs by), slots given out of
// PCI order included; a VM without its seed yet is not listed.
func TestSliceVMsFollowHostdevOrder(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H200Slice8())
	all := slots(t, env)
	const alloc = "a-slvm00000001"
	if _, _, err := run(t, env, api.TaskVMProvision, provisionParams(h, alloc, []api.Slot{all[3], all[1]})); err != nil {
		t.Fatal(err)
	}
	spec, err := h.Hypervisor.Spec(alloc)
	if err != nil {
		t.Fatal(err)
	}
	var hostdevGPUs []string
	for _, d := range spec.HostDevs {
		if string(d) == all[3].GPUPCI || string(d) == all[1].GPUPCI {
			hostdevGPUs = append(hostdevGPUs, string(d))
		}
	}
	// A lease whose seed is not written yet.
	if err := os.WriteFile(tasks.PathsFor(h.StateDir, "a-slvm00000002").Lease, []byte(`{"allocation_id":"a-slvm00000002","gpus":["`+all[0].GPUPCI+`"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	vms, err := tasks.SliceVMs(h.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(vms) != 1 || vms[0].Allocation != alloc || vms[0].PosixUser != api.PosixUser(alloc) ||
		!slices.Equal(vms[0].GPUs, hostdevGPUs) || !slices.Equal(hostdevGPUs, []string{all[3].GPUPCI, all[1].GPUPCI}) {
		t.Errorf("got %+v; want one VM %s for %s with GPUs %v (hostdev order)", vms, alloc, api.PosixUser(alloc), hostdevGPUs)
	}
}
