package jobs

import (
	"context"
	"fmt"

	"github.com/gpuaas/gpuaas/controld/store"
)

// Running reports whether an allocation runs a job (starting or
// running): idle release leaves such an allocation alone
// (controld/idle, docs/jobs.md).
func Running(ctx context.Context, q store.Querier, allocationID string) (bool, error) {
	var busy bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM jobs WHERE allocation_id = $1 AND state IN ('starting', 'running'))`,
		allocationID).Scan(&busy); err != nil {
		return false, fmt.Errorf("jobs of %s: %w", allocationID, err)
	}
	return busy, nil
}
