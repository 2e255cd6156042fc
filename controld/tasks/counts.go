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
	out, err := store.Counts(ctx, q, `SELECT state, count(*) FROM node_tasks
		WHERE state IN `+unfinished+` GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count open tasks: %w", err)
	}
	return out, nil
}
