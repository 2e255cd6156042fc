package sched

import (
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Environment is what an allocation's environment on its node is made
// from: the scheduler decides, by the allocation's shape, which task
// makes it and which removes it (a POSIX user for bare metal, a VM for a
// slice; hostd's env.Factory is the same choice on the node).
type Environment struct {
	AllocationID string
	UserID       string
	// Slots are the slots placed; VCPUs, MemoryMiB and Image size a VM.
	Slots     []api.Slot
	VCPUs     int
	MemoryMiB int
	Image     api.VMImage
	// Volumes are mounted for the allocation's user (bare metal) or
	// handed to its VM as disks (slices).
	Volumes []api.VolumeAttachment
}

// ProvisionTask is the task that makes the environment of an allocation
// of shape on nodeID.
func ProvisionTask(shape, nodeID string, e Environment) tasks.Task {
	t := tasks.Task{NodeID: nodeID, AllocationID: e.AllocationID}
	if shape == api.ShapeBaremetal {
		t.Type = api.TaskProvisionUser
		t.Params = hostproto.UserProvisionParams{AllocationID: e.AllocationID, UserID: e.UserID,
			PosixUser: api.PosixUser(e.AllocationID), Volumes: e.Volumes}
		return t
	}
	t.Type = api.TaskVMProvision
	t.Params = hostproto.VMProvisionParams{AllocationID: e.AllocationID, UserID: e.UserID,
		PosixUser: api.PosixUser(e.AllocationID), Slots: e.Slots, VCPUs: e.VCPUs, MemoryMiB: e.MemoryMiB, Image: e.Image,
		Volumes: e.Volumes}
	return t
}

// ReleaseTask is the task that removes the environment of allocation a
// from its node; cleanup marks the release of one whose provisioning
// failed.
func ReleaseTask(a api.Allocation, cleanup bool) tasks.Task {
	t := tasks.Task{NodeID: a.NodeID, AllocationID: a.ID}
	if a.Shape == api.ShapeBaremetal {
		t.Type = api.TaskDeprovisionUser
		t.Params = hostproto.UserDeprovisionParams{AllocationID: a.ID, PosixUser: api.PosixUser(a.ID), Cleanup: cleanup}
		return t
	}
	t.Type = api.TaskVMRelease
	t.Params = hostproto.VMReleaseParams{AllocationID: a.ID, Slots: a.Slots, Cleanup: cleanup}
	return t
}
