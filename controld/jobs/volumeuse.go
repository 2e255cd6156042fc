package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
)

// RunningInImage returns a job of allocation allocID that has not ended
// and runs in an image, or "" when none does: hostd binds every volume
// mounted for the allocation into such a job's container
// (hostd/tasks/jobimage_volumes.go), so a volume detach waits for it
// (docs/decisions/0064-volume-attach-running.md).
func RunningInImage(ctx context.Context, q store.Querier, allocID string) (string, error) {
	var id string
	err := q.QueryRow(ctx, `SELECT id FROM jobs
		WHERE allocation_id = $1 AND state NOT IN ('succeeded', 'failed', 'cancelled', 'lost')
		  AND coalesce(spec->>'image', '') <> ''
		ORDER BY created_at, id LIMIT 1`, allocID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("jobs in an image on %s: %w", allocID, err)
	}
	return id, nil
}
