package workloads

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/internal/api"
)

// allocationGPUs returns the PCI addresses of the GPUs a workload of
// allocation allocID gets, in slot order: all of the allocation's when
// want is 0, else its first want (docs/apps.md, "GPUs"). The slots
// reserved for the allocation are the only GPUs it may name, so on a node
// shared by several allocations a container never sees another's. More
// than the allocation has is refused naming the field.
func allocationGPUs(ctx context.Context, q pgx.Tx, allocID string, want int) ([]string, error) {
	pcis, err := node.GPUsOfAllocation(ctx, q, allocID)
	if err != nil {
		return nil, fmt.Errorf("allocation %s gpus: %w", allocID, err)
	}
	switch {
	case want == 0:
		return pcis, nil
	case want > len(pcis):
		return nil, bad("gpus", "%d; allocation %s has %d", want, allocID, len(pcis))
	}
	return pcis[:want], nil
}

// checkGPUs refuses a GPU count that can never be met.
func checkGPUs(req *api.AppRunRequest) error {
	switch {
	case req.GPUs < 0:
		return bad("gpus", "%d; a count of at least 1, or none for all of the allocation's", req.GPUs)
	case req.NoGPUs && req.GPUs > 0:
		return bad("gpus", "%d with no_gpus: give one or the other", req.GPUs)
	}
	return nil
}

// workloadGPUs are the GPUs workload.start names (allocationGPUs) and how
// many the container has, which its GPU-seconds count (docs/apps.md,
// "Metering"): none with NoGPUs; all of the allocation's when its slots
// name none (hostd then gives every GPU of the node, a bare-metal
// allocation's).
func workloadGPUs(ctx context.Context, q pgx.Tx, a api.Allocation, req api.AppRunRequest) ([]string, int, error) {
	if req.NoGPUs {
		return nil, 0, nil
	}
	gpus, err := allocationGPUs(ctx, q, a.ID, req.GPUs)
	if err != nil {
		return nil, 0, err
	}
	if len(gpus) == 0 {
		return nil, a.GPUs, nil
	}
	return gpus, len(gpus), nil
}
