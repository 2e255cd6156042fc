package sched_test

import (
	"reflect"
	"testing"

	"github.com/gpuaas/gpuaas/controld/sched"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestEnvironmentTasksFollowTheShape: a bare-metal allocation's
// environment is a POSIX user on the node, a slice's a VM sized by the
// SKU; release removes what provisioning made.
func TestEnvironmentTasksFollowTheShape(t *testing.T) {
	slots := []api.Slot{{ID: "s-1"}, {ID: "s-2"}}
	e := sched.Environment{AllocationID: "a-1", UserID: "u-1", Slots: slots, VCPUs: 16, MemoryMiB: 65536,
		Image: api.VMImage{Name: "img"}}

	metal := sched.ProvisionTask(api.ShapeBaremetal, "n-1", e)
	if metal.Type != api.TaskProvisionUser || metal.NodeID != "n-1" || metal.AllocationID != "a-1" ||
		!reflect.DeepEqual(metal.Params, hostproto.UserProvisionParams{AllocationID: "a-1", UserID: "u-1", PosixUser: api.PosixUser("a-1")}) {
		t.Errorf("bare metal: %+v; want a provision_user of a-1's POSIX user on n-1", metal)
	}
	slice := sched.ProvisionTask(api.ShapeGPUSlice, "n-2", e)
	if slice.Type != api.TaskVMProvision || slice.NodeID != "n-2" ||
		!reflect.DeepEqual(slice.Params, hostproto.VMProvisionParams{AllocationID: "a-1", UserID: "u-1", PosixUser: api.PosixUser("a-1"),
			Slots: slots, VCPUs: 16, MemoryMiB: 65536, Image: api.VMImage{Name: "img"}}) {
		t.Errorf("slice: %+v; want a vm_provision of the placed slots, sized", slice)
	}

	a := api.Allocation{ID: "a-1", NodeID: "n-1", Shape: api.ShapeBaremetal, Slots: slots}
	if r := sched.ReleaseTask(a, true); r.Type != api.TaskDeprovisionUser || r.NodeID != "n-1" ||
		!reflect.DeepEqual(r.Params, hostproto.UserDeprovisionParams{AllocationID: "a-1", PosixUser: api.PosixUser("a-1"), Cleanup: true}) {
		t.Errorf("bare-metal release: %+v; want the POSIX user's deprovision, cleanup kept", r)
	}
	a.Shape = api.ShapeGPUSlice
	if r := sched.ReleaseTask(a, false); r.Type != api.TaskVMRelease ||
		!reflect.DeepEqual(r.Params, hostproto.VMReleaseParams{AllocationID: "a-1", Slots: slots}) {
		t.Errorf("slice release: %+v; want the VM's release of its slots", r)
	}
}
