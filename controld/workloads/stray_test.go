package workloads_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/workloads"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestStopOfAStrayContainer: a stop that found no container (the start
// still making it, or hostd restarted and forgot the stop) ends the
// workload; the start's late report of a running container then queues a
// workload.stop with remove (and its priced image's removal) for it,
// audited as the system's, and changes
// nothing else — the workload stays stopped, no app meter starts
// (docs/apps.md, "Prices"). Another report queues one more stop, no loop.
func TestStopOfAStrayContainer(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	w.priceApp(t, "jup", "", 360)
	wl, err := w.run(t, w.bob, api.AppRunRequest{Image: "jup", AllocationID: w.allocID})
	if err != nil {
		t.Fatal(err)
	}
	startID, typ, _ := w.currentTask(t, wl.ID)
	if err := w.tx(t, func(tx pgx.Tx) error {
		_, _, err := workloads.Stop(ctx, tx, w.bob, wl.ID, workloads.Config{}, t0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var stopID string
	if err := w.pool.QueryRow(ctx, `SELECT id FROM node_tasks WHERE type = $1`, api.TaskWorkloadStop).Scan(&stopID); err != nil {
		t.Fatal(err)
	}
	w.settle(t, stopID, api.TaskWorkloadStop, reported(t, hostproto.WorkloadReport{WorkloadID: wl.ID, State: api.ContainerMissing}))
	if got := w.get(t, wl.ID); got.State != api.WorkloadStopped {
		t.Fatalf("after the stop found no container: %s; want stopped", got.State)
	}
	// A priced workload's end removes its container and image (a no-op
	// here: the container is not made yet).
	removals := func() int {
		t.Helper()
		return w.count(t, `SELECT count(*) FROM node_tasks WHERE type = $1 AND params->>'workload_id' = $2
			AND params->>'remove' = 'true' AND params->>'remove_image' = 'true'`, api.TaskWorkloadStop, wl.ID)
	}
	if n := removals(); n != 1 {
		t.Errorf("%d removals of the priced workload's container and image at its end; want 1", n)
	}
	started := t0.Add(30e9)
	w.settle(t, startID, typ, reported(t, hostproto.WorkloadReport{WorkloadID: wl.ID, State: api.ContainerRunning, StartedAt: &started}))
	if n := removals(); n != 2 {
		t.Errorf("%d removals after the stray container's report; want 2 (the end's, the stray's)", n)
	}
	if n := w.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'app.stop' AND target_id = $1 AND actor_id = 'system:workloads'`, wl.ID); n != 1 {
		t.Errorf("%d system audits of the stray stop; want 1", n)
	}
	if got := w.get(t, wl.ID); got.State != api.WorkloadStopped || got.StartedAt != nil {
		t.Errorf("after the late start: %s started %v; want stopped, never started", got.State, got.StartedAt)
	}
	if n := w.count(t, `SELECT count(*) FROM app_meters WHERE workload_id = $1`, wl.ID); n != 0 {
		t.Errorf("%d app meters of a stopped workload; want none", n)
	}
	// The same report again (redelivered): one more stop, idempotent on
	// the node; a report of an exited container queues none.
	w.settle(t, startID, typ, reported(t, hostproto.WorkloadReport{WorkloadID: wl.ID, State: api.ContainerRunning}))
	w.settle(t, startID, typ, reported(t, hostproto.WorkloadReport{WorkloadID: wl.ID, State: api.ContainerExited}))
	if n := removals(); n != 3 {
		t.Errorf("%d removals after two running reports and an exit; want 3", n)
	}
}
