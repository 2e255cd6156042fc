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
	if req.GPUs < 0 {
		return bad("gpus", "%d; a count of at least 1, or none for all of the allocation's", req.GPUs)
	}
	return nil
}
