package node

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
)

// AllocationsOfGPUs maps the PCI addresses of a node's GPUs to the
// allocations holding their slots; GPUs whose slot is not reserved are
// absent.
func AllocationsOfGPUs(ctx context.Context, q store.Querier, nodeID string, pcis []string) (map[string]string, error) {
	rows, err := q.Query(ctx, `SELECT gpu_pci, allocation_id FROM slots
		WHERE node_id = $1 AND gpu_pci = ANY($2) AND allocation_id IS NOT NULL`, nodeID, pcis)
	if err != nil {
		return nil, fmt.Errorf("allocations of GPUs on %s: %w", nodeID, err)
	}
	out := map[string]string{}
	var pci, id string
	_, err = pgx.ForEachRow(rows, []any{&pci, &id}, func() error { out[pci] = id; return nil })
	if err != nil {
		return nil, fmt.Errorf("allocations of GPUs on %s: %w", nodeID, err)
	}
	return out, nil
}

// GPUsOfAllocation returns the PCI addresses of the GPUs whose slots are
// reserved for allocation allocID, in slot order.
func GPUsOfAllocation(ctx context.Context, q store.Querier, allocID string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT gpu_pci FROM slots WHERE allocation_id = $1 AND state = 'reserved' ORDER BY idx`, allocID)
	if err != nil {
		return nil, fmt.Errorf("GPUs of %s: %w", allocID, err)
	}
	pcis, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("GPUs of %s: %w", allocID, err)
	}
	return pcis, nil
}
