package alloc

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
)

// claimVolumes locks the volumes a create asks for (controld/volumes,
// docs/volumes.md): they decide the node. They attach to allocations
// placed now: bare metal mounts them for the user, a slice's VM gets them
// as disks on a node whose slices take them (volumes.CheckSliceNode);
// waiting in the queue for a volume's node is not built.
func claimVolumes(ctx context.Context, tx pgx.Tx, projectID string, sku api.SKU, req api.AllocCreateRequest, now time.Time) (volumes.Claim, error) {
	if len(req.Volumes) == 0 {
		return volumes.Claim{}, nil
	}
	if req.Queue {
		return volumes.Claim{}, api.Errorf(api.CodeInvalidArgument, "--queue with --volume is not supported yet: the allocation must be placed on the volume's node now")
	}
	claim, err := volumes.Reserve(ctx, tx, projectID, req.Volumes, now)
	if err != nil || sku.WholeNode() {
		return claim, err
	}
	if err := volumes.CheckSliceNode(ctx, tx, claim.NodeID); err != nil {
		return volumes.Claim{}, err
	}
	return claim, nil
}
