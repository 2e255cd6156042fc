package idle

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/store"
)

// column names the activity a report moves.
type column string

const (
	gateColumn column = "gate_active_at"
	gpuColumn  column = "gpu_active_at"
)

// RecordGateActivity records a gateway's report of the last channel data
// of allocations. Times in the future count as now (a gateway's clock may
// run ahead; none may keep an allocation alive by lying); unknown or
// inactive allocations are skipped. It returns how many it recorded.
func RecordGateActivity(ctx context.Context, q store.Querier, last map[string]time.Time, now time.Time) (int, error) {
	return record(ctx, q, gateColumn, last, now)
}

// RecordGPUActivity records hostd's report of when each GPU of nodeID
// was last busy, for the allocations holding those GPUs.
func RecordGPUActivity(ctx context.Context, q store.Querier, nodeID string, gpuActive map[string]time.Time, now time.Time) (int, error) {
	if len(gpuActive) == 0 {
		return 0, nil
	}
	pcis := make([]string, 0, len(gpuActive))
	for pci := range gpuActive {
		pcis = append(pcis, pci)
	}
	owners, err := node.AllocationsOfGPUs(ctx, q, nodeID, pcis)
	if err != nil {
		return 0, err
	}
	last := map[string]time.Time{}
	for pci, id := range owners {
		if t := gpuActive[pci]; t.After(last[id]) {
			last[id] = t
		}
	}
	return record(ctx, q, gpuColumn, last, now)
}

func record(ctx context.Context, q store.Querier, col column, last map[string]time.Time, now time.Time) (int, error) {
	if len(last) == 0 {
		return 0, nil
	}
	ids := make([]string, 0, len(last))
	for id := range last {
		ids = append(ids, id)
	}
	active, err := alloc.ActiveUnder(ctx, q, nil, ids)
	if err != nil {
		return 0, err
	}
	ids = ids[:0]
	ats := make([]time.Time, 0, len(active))
	for _, a := range active {
		at := last[a.ID]
		if at.After(now) {
			at = now
		}
		if at.IsZero() {
			continue
		}
		ids, ats = append(ids, a.ID), append(ats, at.UTC())
	}
	if len(ids) == 0 {
		return 0, nil
	}
	// col is one of two constants, never input.
	_, err = q.Exec(ctx, `INSERT INTO idle_allocations (allocation_id, `+string(col)+`)
		SELECT * FROM unnest($1::text[], $2::timestamptz[]) ORDER BY 1
		ON CONFLICT (allocation_id) DO UPDATE SET `+string(col)+` =
			greatest(idle_allocations.`+string(col)+`, EXCLUDED.`+string(col)+`)`, ids, ats)
	if err != nil {
		return 0, fmt.Errorf("record %s: %w", col, err)
	}
	return len(ids), nil
}
