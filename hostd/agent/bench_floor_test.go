package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// floorTablesSQL makes the floor's copies of node_tasks and audit_logs:
// the same columns, checks, defaults and indexes (LIKE … INCLUDING ALL),
// none of the real tables' triggers or foreign keys, and a statement
// trigger that notifies the floor's dispatcher as node_tasks_notify does
// controld's.
const floorTablesSQL = `
CREATE TABLE floor_tasks (LIKE node_tasks INCLUDING ALL);
CREATE TABLE floor_audit (LIKE audit_logs INCLUDING ALL);
CREATE FUNCTION floor_tasks_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('floor_tasks', '');
    RETURN NULL;
END $$;
CREATE TRIGGER floor_tasks_notify AFTER INSERT ON floor_tasks
    FOR EACH STATEMENT EXECUTE FUNCTION floor_tasks_notify();`

// BenchmarkTaskFloor is the least a task recorded in Postgres costs, the
// floor of BenchmarkTaskRoundTrip: the same database and tables' shape,
// the same notification, the same polling, and nothing of controld's or
// hostd's own. A task is inserted (its trigger notifies); a dispatcher
// LISTENing hears it and claims it (one UPDATE); it is sent to the node
// as a NATS request and the node answers at once; the node sends its
// result as a NATS request and the result's handler records it with its
// audit row in one round trip (one pipeline, one implicit transaction)
// and acknowledges it; the benchmark polls the task's state as
// BenchmarkTaskRoundTrip does. What it leaves out of the real path, and
// what it then cannot tell: signatures (Ed25519 both ways), the report's
// sequence claim, the accepted record, the settler's own statement, the
// envelope encoding — each is a guarantee of the design (bench/README.md,
// "task round trip").
func BenchmarkTaskFloor(b *testing.B) {
	env, _ := benchFleet(b)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	// The test database's owner: controld's own pool may not create tables.
	pool, err := pgxpool.New(ctx, env.DSN)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, floorTablesSQL); err != nil {
		b.Fatal(err)
	}
	nc := testutil.NATS(b).Connect(b)
	payload := make([]byte, 400) // about a signed task envelope, and a result

	// The result's handler: the outcome and its audit row, one round trip.
	var seq int64 // a subscription's messages are handled one at a time
	if _, err := nc.Subscribe("floor.result", func(m *nats.Msg) {
		id := m.Header.Get("task")
		now := time.Now()
		batch := &pgx.Batch{}
		batch.Queue(`UPDATE floor_tasks SET state = 'succeeded', finished_at = $2, updated_at = $2
			WHERE id = $1 AND state NOT IN ('succeeded', 'failed', 'interrupted', 'expired')`, id, now)
		// The row's place in its stream without the chain's trigger:
		// the floor has one writer.
		seq++
		batch.Queue(`INSERT INTO floor_audit (at, actor_id, action, target_type, target_id, detail, stream, seq, prev_hash, hash)
			VALUES ($1, 'node:floor', 'task.settle', 'task', $2, '{"type": "diag.health_probe", "status": "succeeded"}',
				'', $3, '', '')`, now, id, seq)
		if err := pool.SendBatch(ctx, batch).Close(); err != nil {
			if ctx.Err() == nil {
				b.Error(err)
			}
			return
		}
		_ = m.Respond([]byte(`{"ok":true}`))
	}); err != nil {
		b.Fatal(err)
	}
	// The node: answers a task at once, then sends its result.
	if _, err := nc.Subscribe("floor.task", func(m *nats.Msg) {
		_ = m.Respond([]byte(`{"status":"accepted"}`))
		res := nats.NewMsg("floor.result")
		res.Header.Set("task", m.Header.Get("task"))
		res.Data = payload
		if _, err := nc.RequestMsg(res, 5*time.Second); err != nil && ctx.Err() == nil {
			b.Error(err)
		}
	}); err != nil {
		b.Fatal(err)
	}
	// The dispatcher.
	listening := make(chan error, 1)
	dispatched := make(chan struct{})
	go func() {
		defer close(dispatched)
		conn, err := pool.Acquire(ctx)
		if err == nil {
			defer conn.Release()
			_, err = conn.Exec(ctx, `LISTEN floor_tasks`)
		}
		listening <- err
		if err != nil {
			return
		}
		for {
			if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
				return
			}
			rows, err := pool.Query(ctx, `UPDATE floor_tasks SET state = 'dispatched', dispatched_at = $1,
					attempts = attempts + 1, updated_at = $1
				WHERE id IN (SELECT id FROM floor_tasks WHERE state = 'pending'
					ORDER BY created_at, id LIMIT 64 FOR UPDATE SKIP LOCKED)
				RETURNING id`, time.Now())
			if err != nil {
				if ctx.Err() == nil {
					b.Error(err)
				}
				return
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				b.Error(err)
				return
			}
			for _, id := range ids {
				msg := nats.NewMsg("floor.task")
				msg.Header.Set("task", id)
				msg.Data = payload
				if _, err := nc.RequestMsg(msg, 5*time.Second); err != nil && ctx.Err() == nil {
					b.Error(err)
				}
			}
		}
	}()
	if err := <-listening; err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cancel(); <-dispatched })

	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		id := fmt.Sprintf("t-floor-%d", i)
		if _, err := pool.Exec(ctx, `INSERT INTO floor_tasks (id, node_id, type, state, created_at, updated_at, next_attempt_at)
			VALUES ($1, 'n-floor', 'diag.health_probe', 'pending', $2, $2, $2)`, id, start); err != nil {
			b.Fatal(err)
		}
		for {
			var state string
			if err := pool.QueryRow(ctx, `SELECT state FROM floor_tasks WHERE id = $1`, id).Scan(&state); err != nil {
				b.Fatal(err)
			}
			if state == "succeeded" {
				break
			}
			if time.Since(start) > 10*time.Second {
				b.Fatalf("task %s is %s after 10 s", id, state)
			}
			time.Sleep(100 * time.Microsecond) // as BenchmarkTaskRoundTrip polls
		}
		durs = append(durs, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, durs)
}
