package node

import (
	"context"
	"fmt"

	"github.com/gpuaas/gpuaas/controld/store"
)

// States lists the states a node may be in.
var States = []string{"enrolled", "ready", "draining", "down"}

// CountByState returns how many nodes are in each state.
func CountByState(ctx context.Context, q store.Querier) (map[string]int, error) {
	rows, err := q.Query(ctx, `SELECT state, count(*) FROM nodes GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count nodes: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("count nodes: %w", err)
		}
		out[state] = n
	}
	return out, rows.Err()
}
