// Package tasks owns node_tasks and node_task_events: the durable queue of
// work for hostd and each task's timeline. Domain code enqueues tasks in
// the transaction of the change that needs them; controld/hosts delivers
// them (claim, accept, retry), records their progress and settles their
// results through this package, which alone moves a task between states.
package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/corrid"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// Channel is the Postgres notification channel a new task is announced on
// (trigger node_tasks_notify): the dispatcher LISTENs to it.
const Channel = "node_tasks"

// Task is a task to queue for a node.
type Task struct {
	NodeID       string
	AllocationID string
	Type         string
	Params       any
}

// unfinished are the task states that block later tasks of the same
// allocation: an allocation's tasks run one at a time, in order.
const unfinished = `('pending', 'dispatched', 'accepted', 'running')`

// Finished reports whether a task in state is settled: its result, if
// any, was applied and a late report of it is ignored.
func Finished(state string) bool {
	switch state {
	case hostproto.TaskSucceeded, hostproto.TaskFailed, hostproto.TaskInterrupted, "expired":
		return true
	}
	return false
}

// Enqueue inserts a pending task and returns its id. The correlation id
// ctx carries (the request that queued the task) is kept with it, for
// the envelope and the log lines of its delivery and result.

func Enqueue(ctx context.Context, q store.Querier, t Task, now time.Time) (string, error) {
	id, args, err := enqueueArgs(ctx, t, now)
	if err != nil {
		return "", err
	}
	if _, err := q.Exec(ctx, enqueueSQL, args...); err != nil {
		return "", fmt.Errorf("enqueue %s for %s: %w", t.Type, t.NodeID, err)
	}
	return id, nil
}

// QueueEnqueue queues Enqueue's insert in b, for a caller that sends it
// with other statements in one round trip; its error comes back when the
// batch's results are read.
func QueueEnqueue(ctx context.Context, b *pgx.Batch, t Task, now time.Time) (string, error) {
	id, args, err := enqueueArgs(ctx, t, now)
	if err != nil {
		return "", err
	}
	// Fn rather than Exec(fn): Exec's callback sees only successes.
	b.Queue(enqueueSQL, args...).Fn = func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("enqueue %s for %s: %w", t.Type, t.NodeID, err)
		}
		return nil
	}
	return id, nil
}

var enqueueSQL = `INSERT INTO node_tasks (id, node_id, allocation_id, type, params, state, created_at, updated_at)
		VALUES ($1,$2,$3,$4,` + withCorr("$5::jsonb", "$7") + `,'pending',$6,$6)`

func enqueueArgs(ctx context.Context, t Task, now time.Time) (string, []any, error) {
	params := []byte("{}")
	if t.Params != nil {
		var err error
		if params, err = json.Marshal(t.Params); err != nil {
			return "", nil, fmt.Errorf("task params: %w", err)
		}
	}
	id := ids.New(ids.Task)
	var alloc *string
	if t.AllocationID != "" {
		alloc = &t.AllocationID
	}
	return id, []any{id, t.NodeID, alloc, t.Type, params, now, corrid.From(ctx)}, nil
}

// OpenByNode counts the unfinished tasks of each of nodeIDs; a node with
// none is absent from the map.
func OpenByNode(ctx context.Context, q store.Querier, nodeIDs []string) (map[string]int, error) {
	out, err := store.Counts(ctx, q, `SELECT node_id, count(*) FROM node_tasks
		WHERE node_id = ANY($1) AND state IN `+unfinished+` GROUP BY node_id`, nodeIDs)
	if err != nil {
		return nil, fmt.Errorf("open tasks: %w", err)
	}
	return out, nil
}

// corrParam is where a task's correlation id is kept: a key of its params
// object that the readers of params (Claim, PendingFor) take out again,
// so no handler ever sees it. (A column would need a migration; this
// keeps the schema as it is.)
const corrParam = "_correlation_id"

// withCorr is the SQL for params (an expression) with the correlation id
// (a text expression) added, when there is one and params is an object.
func withCorr(params, corr string) string {
	return `CASE WHEN ` + corr + ` <> '' AND jsonb_typeof(` + params + `) = 'object'
		THEN ` + params + ` || jsonb_build_object('` + corrParam + `', ` + corr + `::text) ELSE ` + params + ` END`
}

// paramsAndCorr is the SQL selecting a task's params (without its
// correlation id) and its correlation id ("" for none), from table alias t.
func paramsAndCorr(t string) string {
	return `CASE WHEN jsonb_typeof(` + t + `.params) = 'object' THEN ` + t + `.params - '` + corrParam + `' ELSE ` +
		t + `.params END, coalesce(` + t + `.params->>'` + corrParam + `', '')`
}

// OpenForAllocation counts the unfinished tasks of an allocation (a
// failed provisioning's cleanup still to run, say).
func OpenForAllocation(ctx context.Context, q store.Querier, allocationID string) (int, error) {
	var n int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM node_tasks
		WHERE allocation_id = $1 AND state IN `+unfinished, allocationID).Scan(&n); err != nil {
		return 0, fmt.Errorf("open tasks of %s: %w", allocationID, err)
	}
	return n, nil
}
