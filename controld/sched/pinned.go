package sched

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/internal/api"
)

// placeOn reserves r on node r.NodeID only: an allocation that mounts
// volumes goes to the node they are on (docs/volumes.md). Bare metal
// takes the whole node; a slice (whose VM gets the volumes as disks,
// docs/decisions/0030-volumes-in-slices.md) takes its GPUs there from
// the NUMA nodes with the most free slots first. No capacity names the
// node and why.
func placeOn(ctx context.Context, tx pgx.Tx, r Request) (Placement, error) {
	if r.Shape != api.ShapeBaremetal && r.Shape != api.ShapeGPUSlice {
		return Placement{}, api.Errorf(api.CodeInvalidArgument, "unknown shape %q", r.Shape)
	}
	d, err := node.Get(ctx, tx, r.NodeID)
	if err != nil {
		return Placement{}, err
	}
	n := d.Node
	switch {
	case n.Shape != r.Shape || n.GPUModel != r.GPUModel:
		return Placement{}, api.Errorf(api.CodeNoCapacity, "the volumes are on node %s, a %s %s node: it does not serve %d × %s (%s)",
			n.Name, n.GPUModel, n.Shape, r.GPUs, r.GPUModel, r.Shape).WithHint("pick the SKU of that node (`gpuaas catalog list`)")
	case n.State != api.NodeReady:
		return Placement{}, api.Errorf(api.CodeNoCapacity, "the volumes are on node %s, which is %s", n.Name, n.State)
	}
	whole := r.Shape == api.ShapeBaremetal
	slots, ok, err := node.Reserve(ctx, tx, r.AllocationID, node.Candidate{NodeID: n.ID, NUMA: -1, Whole: whole}, r.GPUs)
	if err != nil {
		return Placement{}, err
	}
	if !ok && !whole {
		return Placement{}, api.Errorf(api.CodeNoCapacity, "the volumes are on node %s, which has not %d free slots", n.Name, r.GPUs).
			WithHint("release an allocation there, wait for one to end, or ask for fewer GPUs")
	}
	if !ok {
		return Placement{}, api.Errorf(api.CodeNoCapacity, "the volumes are on node %s, which is in use", n.Name).
			WithHint("release the allocation there, or wait for it to end")
	}
	return Placement{NodeID: n.ID, Slots: slots}, nil
}
