package hosts

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Timeline returns an allocation's host-side progress, oldest first.
func Timeline(ctx context.Context, q store.Querier, allocationID string) ([]api.PhaseTiming, error) {
	rows, err := q.Query(ctx, `SELECT t.type, e.phase, e.status, e.at, e.elapsed_ms, e.message
		FROM node_task_events e JOIN node_tasks t ON t.id = e.task_id
		WHERE t.allocation_id = $1 ORDER BY e.at, e.id`, allocationID)
	if err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.PhaseTiming, error) {
		var p api.PhaseTiming
		return p, r.Scan(&p.Task, &p.Phase, &p.Status, &p.At, &p.ElapsedMS, &p.Message)
	})
	if err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	return out, nil
}
