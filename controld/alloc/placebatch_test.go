package alloc

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/internal/api"
)

// tripLog records the statements of each round trip a connection makes:
// one statement on its own, or all of a batch.
type tripLog struct {
	mu    sync.Mutex // mu protects trips
	trips [][]string
}

func (l *tripLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trips = append(l.trips, []string{d.SQL})
	return ctx
}
func (l *tripLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (l *tripLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sqls []string
	for _, q := range d.Batch.QueuedQueries {
		sqls = append(sqls, q.SQL)
	}
	l.trips = append(l.trips, sqls)
	return ctx
}
func (l *tripLog) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (l *tripLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestPlaceWritesNodeTransitionAndTaskInOneRoundTrip is the regression
// test of creates with fewer round trips (bench/README.md): once the
// scheduler has reserved slots, the allocation's node, its transition
// (update and record) and its provisioning task go to the database in
// one batch, where they were four statements on their own.
func TestPlaceWritesNodeTransitionAndTaskInOneRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	if _, err := f.pool.Exec(ctx, `INSERT INTO nodes (id, name, shape, gpu_model, state, created_at, updated_at)
		VALUES ('n-1', 'n1', 'gpu_slice', 'H200', 'ready', now(), now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `INSERT INTO slots (id, node_id, idx, gpu_pci, numa_node, state)
		SELECT 'sl-' || i, 'n-1', i, format('0000:%s:00.0', to_hex(24 + 16 * i)), i / 4, 'free' FROM generate_series(0, 7) i`); err != nil {
		t.Fatal(err)
	}
	a := f.insertAlloc(t, api.AllocRequested, 1, false)
	sku, err := catalog.Get(ctx, f.pool, "h200-slice")
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := pgxpool.ParseConfig(f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	var log tripLog
	cfg.ConnConfig.Tracer = &log
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		placed, err := place(ctx, tx, &a, sku, f.userID, time.Now().UTC())
		if err == nil && !placed {
			t.Error("not placed")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	var writes [][]string // the round trips holding place's own writes
	for _, trip := range log.trips {
		for _, sql := range trip {
			if strings.Contains(sql, "node_tasks") || strings.Contains(sql, "allocation_transitions") ||
				strings.Contains(sql, "SET node_id") || strings.Contains(sql, "SET state=") {
				writes = append(writes, trip)
				break
			}
		}
	}
	if len(writes) != 1 || len(writes[0]) != 4 {
		t.Errorf("round trips holding the node, transition and task writes: got %d (%q); want 1 of 4 statements", len(writes), writes)
	}
	t.Logf("place: %d round trips in all (BEGIN and COMMIT included)", len(log.trips))

	var state, node string
	var transitions, tasks int
	if err := f.pool.QueryRow(ctx, `SELECT state, node_id, (SELECT count(*) FROM allocation_transitions WHERE allocation_id = $1),
		(SELECT count(*) FROM node_tasks WHERE allocation_id = $1) FROM allocations WHERE id = $1`, a.ID).
		Scan(&state, &node, &transitions, &tasks); err != nil {
		t.Fatal(err)
	}
	if state != api.AllocProvisioning || node != "n-1" || transitions != 1 || tasks != 1 {
		t.Errorf("got state %s on %s, %d transitions, %d tasks; want provisioning on n-1, 1, 1", state, node, transitions, tasks)
	}
	if a.State != api.AllocProvisioning || a.Version != 2 || a.NodeID != "n-1" || len(a.Slots) != 1 {
		t.Errorf("returned allocation: got %s v%d on %q with %d slots; want provisioning v2 on n-1 with 1", a.State, a.Version, a.NodeID, len(a.Slots))
	}
}

// tracedPool is a pool on f's database whose connections log their round
// trips in log.
func (f *fixture) tracedPool(t *testing.T, log *tripLog) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = log
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestGetReadsOthersInItsOneBatch is the regression test of alloc.get's
// second round trip (the idle policy was read on its own after the
// allocation's batch, 7.0× the NATS echo where one batch is the goal):
// reads another package queues with GetWithTimeline go in the same
// batch, and their results are there when it returns.
func TestGetReadsOthersInItsOneBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.insertAlloc(t, api.AllocActive, 3, false)
	var log tripLog
	pool := f.tracedPool(t, &log)
	var extra string
	got, err := GetWithTimeline(t.Context(), pool, Actor{UserID: f.userID, Role: api.RoleUser}, a.ID, func(b *pgx.Batch) {
		b.Queue(`SELECT 'policy of ' || $1::text`, a.ID).QueryRow(func(r pgx.Row) error { return r.Scan(&extra) })
	})
	if err != nil || got.ID != a.ID {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if extra != "policy of "+a.ID {
		t.Errorf("the queued read: got %q; want its result", extra)
	}
	if len(log.trips) != 1 || !strings.Contains(log.trips[0][len(log.trips[0])-1], "policy of") {
		t.Errorf("round trips: got %d (%q); want 1 batch ending with the queued read", len(log.trips), log.trips)
	}
}
