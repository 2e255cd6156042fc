package alloc

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
)

// claimVolumes locks the volumes a create asks for (controld/volumes,
// docs/volumes.md): they decide the node. They attach to bare-metal
// allocations placed now; waiting in the queue for a volume's node is
// not built.
func claimVolumes(ctx context.Context, tx pgx.Tx, projectID string, sku api.SKU, req api.AllocCreateRequest) (volumes.Claim, error) {
	if len(req.Volumes) == 0 {
		return volumes.Claim{}, nil
	}
	switch {
	case !sku.WholeNode():
		return volumes.Claim{}, api.Errorf(api.CodeInvalidArgument, "volumes attach to bare-metal allocations only (%s is %s)", sku.ID, sku.Shape).
			WithHint("pick a bare-metal SKU (`gpuaas catalog list`)")
	case req.Queue:
		return volumes.Claim{}, api.Errorf(api.CodeInvalidArgument, "--queue with --volume is not supported yet: the allocation must be placed on the volume's node now")
	}
	return volumes.Reserve(ctx, tx, projectID, req.Volumes)
}
