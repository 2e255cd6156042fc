package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestTaskOfDeadReplicaIsResent: a release task claimed for delivery by a
// replica that died before its message left (the row says dispatched, no
// node ever saw it) is sent again by the live replica within seconds and
// completes; it sat dispatched for 30 s before. A re-send of a task hostd
// already took (its reply lost) is answered duplicate and not run again.
func TestTaskOfDeadReplicaIsResent(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	host := newFakeHost()
	host.blockRelease = make(chan struct{})
	a := startAgent(t, env, t.TempDir(), enroll(t, admin, "node-s"), host.registry())
	readyNode(t, admin, a.NodeID())
	ctx := context.Background()
	al, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitAlloc(t, admin, al.ID, api.AllocActive)

	// The dead replica: it released the allocation and claimed the release
	// task in one transaction, then died before sending it.
	db, err := pgx.Connect(ctx, env.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	var taskID string
	dispatched := time.Now()
	if err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, _, err := alloc.Release(ctx, tx, alloc.Actor{UserID: env.Admin.ID, Role: api.RoleAdmin},
			api.AllocReleaseRequest{ID: al.ID}, dispatched); err != nil {
			return err
		}
		// Claimed after the transaction's start, which the task's
		// next_attempt_at (now()) is.
		dispatched = time.Now()
		claimed, err := tasks.Claim(ctx, tx, dispatched, dispatched.Add(-time.Hour), 64)
		if err != nil {
			return err
		}
		if len(claimed) != 1 || claimed[0].Type != api.TaskVMRelease {
			t.Fatalf("claimed %+v; want the release task alone", claimed)
		}
		taskID = claimed[0].ID
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Reached the node, and controld recorded the node's answer (the
	// handler may start before that answer is applied).
	testutil.EventuallyWithin(t, 20*time.Second, "the release task to reach the node", func() bool {
		if host.count(api.TaskVMRelease) != 1 {
			return false
		}
		var state string
		err := db.QueryRow(ctx, `SELECT state FROM node_tasks WHERE id = $1`, taskID).Scan(&state)
		return err == nil && (state == "accepted" || state == "running")
	})
	t.Logf("re-sent %v after the dead replica claimed it", time.Since(dispatched).Round(time.Millisecond))

	// The node took it, and the reply was lost: controld sends it again.
	tag, err := db.Exec(ctx, `UPDATE node_tasks SET state = 'dispatched', dispatched_at = now() - interval '1 hour'
		WHERE id = $1 AND state IN ('accepted', 'running')`, taskID)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("mark the task dispatched: %v (%d rows)", err, tag.RowsAffected())
	}
	testutil.EventuallyWithin(t, 20*time.Second, "the re-sent task to be accepted as a duplicate", func() bool {
		var state string
		err := db.QueryRow(ctx, `SELECT state FROM node_tasks WHERE id = $1`, taskID).Scan(&state)
		return err == nil && state == "accepted"
	})
	close(host.blockRelease)
	waitAlloc(t, admin, al.ID, api.AllocReleased)
	if n := host.count(api.TaskVMRelease); n != 1 {
		t.Fatalf("release ran %d times; want 1", n)
	}
}
