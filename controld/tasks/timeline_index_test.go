package tasks

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestTimelineReadsByIndex: an allocation's timeline (alloc.get) is read
// through node_tasks' allocation index, not a scan of every task any
// allocation ran — with 5,000 other allocations' tasks in the table no
// sequential scan of node_tasks happens.
func TestTimelineReadsByIndex(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.task(t, api.TaskVMProvision, 0)
	if _, err := f.pool.Exec(ctx, `INSERT INTO node_tasks (id, node_id, allocation_id, type, params, state, created_at, updated_at)
		SELECT 'tk-other-' || g, $1, NULL, 'topology_discover', '{}', 'succeeded', $2, $2 FROM generate_series(1, 5000) g`,
		f.nodeID, f.now); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `ANALYZE node_tasks`); err != nil {
		t.Fatal(err)
	}
	err := pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		var b pgx.Batch
		var timeline []api.PhaseTiming
		QueueTimeline(&b, &timeline, f.allocs)
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return err
		}
		var seq int64
		if err := tx.QueryRow(ctx, `SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'node_tasks'`).Scan(&seq); err != nil {
			return err
		}
		if seq != 0 {
			t.Errorf("the timeline of %s scanned node_tasks %d times; want it read through the allocation index", f.allocs, seq)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
