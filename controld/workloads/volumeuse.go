package workloads

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
)

// MountingVolume returns a workload of allocation allocID that has not
// ended and binds volume volumeID into its container (its spec's mounts,
// mounts.go), or "" when none does: a volume detach waits for it
// (docs/decisions/0064-volume-attach-running.md), since the container's
// bind mount keeps the filesystem alive past the node's umount.
func MountingVolume(ctx context.Context, q store.Querier, allocID, volumeID string) (string, error) {
	var id string
	err := q.QueryRow(ctx, `SELECT id FROM workloads
		WHERE allocation_id = $1 AND state NOT IN ('stopped', 'failed')
		  AND spec->'mounts' @> jsonb_build_array(jsonb_build_object('volume_id', $2::text))
		ORDER BY created_at, id LIMIT 1`, allocID, volumeID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("workloads mounting %s: %w", volumeID, err)
	}
	return id, nil
}
