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
	out, err := store.Counts(ctx, q, `SELECT state, count(*) FROM nodes GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count nodes: %w", err)
	}
	return out, nil
}
