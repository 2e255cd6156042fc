package tasks

import (
	"context"
	"fmt"

	"github.com/gpuaas/gpuaas/controld/store"
)

// OpenStates are the states of tasks not finished; pending ones are the
// dispatcher's queue.
var OpenStates = []string{"pending", "dispatched", "accepted", "running"}

// CountOpen returns how many tasks are in each open state.
func CountOpen(ctx context.Context, q store.Querier) (map[string]int, error) {
	rows, err := q.Query(ctx, `SELECT state, count(*) FROM node_tasks
		WHERE state IN `+unfinished+` GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count open tasks: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("count open tasks: %w", err)
		}
		out[state] = n
	}
	return out, rows.Err()
}
