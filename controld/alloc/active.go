package alloc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
)

// Active is an active allocation and when it last became active (what
// idle release and the maximum duration count from).
type Active struct {
	ID        string
	ProjectID string
	UserID    string
	ActiveAt  time.Time
}

// ActiveUnder lists the active allocations in one of projects or among
// ids (either may be empty), oldest first.
func ActiveUnder(ctx context.Context, q store.Querier, projects, ids []string) ([]Active, error) {
	if len(projects) == 0 && len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, `SELECT a.id, a.project_id, a.user_id,
		coalesce((SELECT max(t.at) FROM allocation_transitions t WHERE t.allocation_id = a.id AND t.to_state = 'active'), a.updated_at)
		FROM allocations a WHERE a.state = 'active' AND (a.project_id = ANY($1) OR a.id = ANY($2))
		ORDER BY a.created_at, a.id`, projects, ids)
	if err != nil {
		return nil, fmt.Errorf("active allocations: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Active, error) {
		var a Active
		err := r.Scan(&a.ID, &a.ProjectID, &a.UserID, &a.ActiveAt)
		a.ActiveAt = a.ActiveAt.UTC()
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("active allocations: %w", err)
	}
	return out, nil
}
