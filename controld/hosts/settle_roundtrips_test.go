package hosts

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestSettleAProbeTakesThreeRoundTrips is the regression test of the task
// path's settle in fewer round trips (bench/README.md, "task round
// trip"): a health probe's result costs BEGIN, the settle statement, and
// one batch holding the node's health update (the settler's
// Effect.Final), the audit row and the COMMIT. It was five (the update,
// the audit row and the COMMIT each on its own). A resend of the same
// result writes nothing: BEGIN, the settle statement, COMMIT.
func TestSettleAProbeTakesThreeRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var trips testutil.RoundTrips
	pool := testutil.TracedPool(t, testutil.Postgres(t, pgTemplate), &trips)
	f := newSettleFixtureOn(t, pool, nil)
	id := f.task(t, api.TaskHealthProbe)
	res := hostproto.TaskResult{NodeID: f.nodeID, TaskID: id, Status: hostproto.TaskSucceeded,
		Result: json.RawMessage(`{"kernel":"6.9"}`), At: time.Now()}
	for _, want := range []struct {
		what  string
		trips int64
	}{{"the result", 3}, {"its resend", 3}} {
		trips.Reset()
		if err := f.svc.settle(ctx, f.nodeID, res); err != nil {
			t.Fatal(err)
		}
		if got := trips.Count(); got != want.trips {
			t.Errorf("settling %s took %d round trips; want %d", want.what, got, want.trips)
		}
	}
	var kernel, state string
	if err := pool.QueryRow(ctx, `SELECT coalesce(n.health->'probe'->>'kernel', ''), t.state FROM nodes n, node_tasks t
		WHERE n.id = $1 AND t.id = $2`, f.nodeID, id).Scan(&kernel, &state); err != nil {
		t.Fatal(err)
	}
	if kernel != "6.9" || state != hostproto.TaskSucceeded {
		t.Errorf("node's probe kernel %q, task %s; want 6.9, succeeded", kernel, state)
	}
	if rows := f.settleAudit(t, id); len(rows) != 1 {
		t.Errorf("got %d task.settle rows; want 1", len(rows))
	}
}

// TestSettleFinalStatementFailingRollsBackTheOutcome: a settler's final
// statement that fails on the server leaves nothing — the task is not
// settled, no audit row, no event — and settle returns the error, so
// the node sends its result again; that resend, applied, settles it once.
func TestSettleFinalStatementFailingRollsBackTheOutcome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var fail atomic.Bool
	fail.Store(true)
	f := newSettleFixture(t, tasks.Settlers{"test.final": func(_ context.Context, _ pgx.Tx, o tasks.Outcome) (tasks.Effect, error) {
		divisor := 1
		if fail.Load() {
			divisor = 0
		}
		return tasks.Effect{Final: func(b *pgx.Batch) {
			b.Queue(`SELECT 1 / $1::int`, divisor).Fn = func(br pgx.BatchResults) error {
				_, err := br.Exec()
				return err
			}
		}}, nil
	}})
	id := f.task(t, "test.final")
	res := hostproto.TaskResult{NodeID: f.nodeID, TaskID: id, Status: hostproto.TaskSucceeded, At: time.Now()}
	if err := f.svc.settle(ctx, f.nodeID, res); err == nil {
		t.Fatal("settle with a failing final statement: nil; want its error")
	}
	var state string
	if err := f.pool.QueryRow(ctx, `SELECT state FROM node_tasks WHERE id = $1`, id).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if tasks.Finished(state) || len(f.settleAudit(t, id)) != 0 {
		t.Fatalf("after a failed final statement: task %s, %d audit rows; want it unsettled, none", state, len(f.settleAudit(t, id)))
	}
	fail.Store(false)
	if err := f.svc.settle(ctx, f.nodeID, res); err != nil {
		t.Fatalf("the resend: %v", err)
	}
	if err := f.pool.QueryRow(ctx, `SELECT state FROM node_tasks WHERE id = $1`, id).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if state != hostproto.TaskSucceeded || len(f.settleAudit(t, id)) != 1 {
		t.Errorf("after the resend: task %s, %d audit rows; want succeeded, one", state, len(f.settleAudit(t, id)))
	}
}
