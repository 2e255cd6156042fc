package hosts

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// settleFixture is a database with one node, and a Service over it with
// the real domains' settlers plus extra.
type settleFixture struct {
	pool   *pgxpool.Pool
	svc    *Service
	log    *testutil.LogCapture
	nodeID string
	freed  atomic.Int32
}

func newSettleFixture(t *testing.T, extra tasks.Settlers) *settleFixture {
	t.Helper()
	pool, err := store.Open(context.Background(), testutil.Postgres(t, pgTemplate), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return newSettleFixtureOn(t, pool, extra)
}

// newSettleFixtureOn is newSettleFixture on a pool of the test's own.
func newSettleFixtureOn(t *testing.T, pool *pgxpool.Pool, extra tasks.Settlers) *settleFixture {
	t.Helper()
	ctx := context.Background()
	f := &settleFixture{pool: pool, nodeID: ids.New(ids.Node)}
	if _, err := pool.Exec(ctx, `INSERT INTO nodes (id, name, shape, gpu_model, state, created_at, updated_at)
		VALUES ($1, 'node-1', 'gpu_slice', 'H200', 'ready', $2, $2)`, f.nodeID, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	log, capture := testutil.CaptureLog(t)
	f.log = capture
	cfg := Config{Pool: pool, NATS: testutil.NATS(t).Connect(t), TaskKey: key, Log: log,
		SlotsFreed: func() { f.freed.Add(1) }}
	if f.svc, err = New(withDomains(t, pool, cfg, extra)); err != nil {
		t.Fatal(err)
	}
	return f
}

// task queues a node task of typ and returns its id.
func (f *settleFixture) task(t *testing.T, typ string) string {
	t.Helper()
	id, err := tasks.Enqueue(context.Background(), f.pool, tasks.Task{NodeID: f.nodeID, Type: typ}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// settleAudit returns the detail of the task.settle audit rows of a task.
func (f *settleFixture) settleAudit(t *testing.T, taskID string) []map[string]string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT detail FROM audit_logs
		WHERE action = 'task.settle' AND target_id = $1 ORDER BY id`, taskID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[map[string]string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSettleUnknownTaskTypeIsRecordedAndVisible: a result of a type no
// domain registered a settler for is recorded as the node reported it
// (so resends and the deadline sweep end), and says so where operators
// look: the audit row's settle_error and an error in the log. A resend
// is acknowledged without a second row.
func TestSettleUnknownTaskTypeIsRecordedAndVisible(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSettleFixture(t, nil)
	id := f.task(t, "test.unknown")
	res := hostproto.TaskResult{NodeID: f.nodeID, TaskID: id, Status: hostproto.TaskSucceeded, At: time.Now()}
	for range 2 {
		if err := f.svc.settle(ctx, f.nodeID, res); err != nil {
			t.Fatalf("settle: %v; want the result recorded", err)
		}
	}
	var state string
	if err := f.pool.QueryRow(ctx, `SELECT state FROM node_tasks WHERE id = $1`, id).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if state != hostproto.TaskSucceeded {
		t.Errorf("task state %q; want %q", state, hostproto.TaskSucceeded)
	}
	rows := f.settleAudit(t, id)
	if len(rows) != 1 {
		t.Fatalf("got %d task.settle rows; want 1", len(rows))
	}
	if got := rows[0]["settle_error"]; !strings.Contains(got, `"test.unknown"`) {
		t.Errorf("audit settle_error %q; want it to name the type without a settler", got)
	}
	if got := f.log.Lines("level=ERROR", "not applied", "test.unknown"); len(got) != 1 {
		t.Errorf("got %d error lines about the unsettled result; want 1", len(got))
	}
}

// TestSettleAppliesTheRegisteredSettler: a result goes to the settler
// registered for its type, in the transaction that records it; the
// settler's events are enqueued and slots it freed retry the queue. A
// known type's audit row has no settle_error.
func TestSettleAppliesTheRegisteredSettler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var seen []tasks.Outcome
	f := newSettleFixture(t, tasks.Settlers{"test.custom": func(ctx context.Context, tx pgx.Tx, o tasks.Outcome) (tasks.Effect, error) {
		seen = append(seen, o)
		return tasks.Effect{SlotsFreed: true, Events: []outbox.Event{{Kind: api.EventNode, Subject: o.NodeID,
			Payload: map[string]string{"settled": o.TaskID}}}}, nil
	}})
	id := f.task(t, "test.custom")
	res := hostproto.TaskResult{NodeID: f.nodeID, TaskID: id, Status: hostproto.TaskFailed, Phase: "boot", Error: "no disk",
		Result: json.RawMessage(`{"x":1}`), At: time.Now()}
	if err := f.svc.settle(ctx, f.nodeID, res); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 {
		t.Fatalf("settler called %d times; want 1", len(seen))
	}
	if o := seen[0]; o.TaskID != id || o.NodeID != f.nodeID || o.Type != "test.custom" || o.AllocationID != "" ||
		o.Result.Status != hostproto.TaskFailed || o.Reason() != "boot: no disk" || o.Now.IsZero() {
		t.Errorf("settler got %+v; want task %s of node %s, failed in boot", o, id, f.nodeID)
	}
	var events int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM outbox_events WHERE payload->>'settled' = $1`, id).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 1 {
		t.Errorf("got %d events of the settler; want 1", events)
	}
	if got := f.freed.Load(); got != 1 {
		t.Errorf("SlotsFreed called %d times; want 1", got)
	}
	rows := f.settleAudit(t, id)
	if len(rows) != 1 || rows[0]["settle_error"] != "" || rows[0]["type"] != "test.custom" || rows[0]["phase"] != "boot" {
		t.Errorf("audit rows %v; want one for test.custom, failed in boot, without settle_error", rows)
	}

	// A domain's settler: the health probe's stores the probe on the node.
	probe := f.task(t, api.TaskHealthProbe)
	if err := f.svc.settle(ctx, f.nodeID, hostproto.TaskResult{NodeID: f.nodeID, TaskID: probe, Status: hostproto.TaskSucceeded,
		Result: json.RawMessage(`{"kernel":"6.8"}`), At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var kernel string
	if err := f.pool.QueryRow(ctx, `SELECT coalesce(health->'probe'->>'kernel', '') FROM nodes WHERE id = $1`, f.nodeID).Scan(&kernel); err != nil {
		t.Fatal(err)
	}
	if kernel != "6.8" {
		t.Errorf("node's probe kernel %q; want 6.8 (node's health probe settler)", kernel)
	}
}
