package sched

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/internal/api"
)

// placeOn reserves r on node r.NodeID only: an allocation that mounts
// volumes goes to the node they are on (docs/volumes.md). Volumes attach
// to bare-metal allocations (a whole node); a slice would need them as
// disks of its VM, which is not built. No capacity names the node and
// why.
func placeOn(ctx context.Context, tx pgx.Tx, r Request) (Placement, error) {
	if r.Shape != api.ShapeBaremetal {
		return Placement{}, api.Errorf(api.CodeInvalidArgument, "volumes attach to bare-metal allocations only (a %s SKU asked)", r.Shape).
			WithHint("pick a bare-metal SKU (`gpuaas catalog list`)")
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
	slots, ok, err := node.Reserve(ctx, tx, r.AllocationID, node.Candidate{NodeID: n.ID, NUMA: -1, Whole: true}, r.GPUs)
	if err != nil {
		return Placement{}, err
	}
	if !ok {
		return Placement{}, api.Errorf(api.CodeNoCapacity, "the volumes are on node %s, which is in use", n.Name).
			WithHint("release the allocation there, or wait for it to end")
	}
	return Placement{NodeID: n.ID, Slots: slots}, nil
}
