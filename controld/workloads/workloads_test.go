package workloads_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/workloads"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestRunQueuesStartByDigest: app.run writes a pending workload and a
// workload.start for its node naming the image by digest and the
// allocation's user; the project's own image is found before the
// platform's, and the name defaults to the image's.
func TestRunQueuesStartByDigest(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	wl, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Command: []string{"/bin/x", "serve"},
		Env: map[string]string{"GREETING": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if wl.State != api.WorkloadPending || wl.Name != "tiny" || wl.Image != "tiny" || !strings.HasPrefix(wl.ID, "w-") ||
		wl.NodeID != "n-1" || len(wl.EnvNames) != 1 {
		t.Errorf("workload %+v", wl)
	}
	_, typ, raw := w.currentTask(t, wl.ID)
	var p hostproto.WorkloadStartParams
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if typ != api.TaskWorkloadStart || p.WorkloadID != wl.ID || p.PosixUser != api.PosixUser(w.allocID) ||
		p.Image != "127.0.0.1:5000/test/tiny@"+wl.Digest || strings.Join(p.Command, " ") != "/bin/x serve" ||
		strings.Join(p.Env, ",") != "GREETING=hi" {
		t.Errorf("task %s %+v", typ, p)
	}
	mine, err := w.run(t, w.bob, api.AppRunRequest{Image: "mine", AllocationID: w.allocID})
	if err != nil || mine.Image != "mine" {
		t.Errorf("the project's own image: %+v, %v", mine, err)
	}
}

// TestRunRefusals: each bad request is refused with its code, naming
// what is wrong, and writes no workload and no task.
func TestRunRefusals(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if _, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "web"}); err != nil {
		t.Fatal(err)
	}
	released := w.allocation(t, api.AllocReleased, api.ShapeBaremetal)
	releasedSlice := w.allocation(t, api.AllocReleased, api.ShapeGPUSlice)
	for _, tt := range []struct {
		name string
		req  api.AppRunRequest
		code api.Code
		says string
	}{
		{"no image", api.AppRunRequest{AllocationID: w.allocID}, api.CodeInvalidArgument, "image"},
		{"no allocation", api.AppRunRequest{Image: "tiny"}, api.CodeInvalidArgument, "allocation_id"},
		{"bad name", api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "Web Server"}, api.CodeInvalidArgument, "name"},
		{"bad env", api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Env: map[string]string{"A-B": "x"}}, api.CodeInvalidArgument, "env.A-B"},
		{"empty program", api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Command: []string{""}}, api.CodeInvalidArgument, "command[0]"},
		{"unknown image", api.AppRunRequest{Image: "ghost", AllocationID: w.allocID}, api.CodeNotFound, "ghost"},
		{"another project's image", api.AppRunRequest{Image: "theirs", AllocationID: w.allocID}, api.CodeNotFound, "no image"},
		{"unverified, published", api.AppRunRequest{Image: "fresh", AllocationID: w.allocID}, api.CodeInvalidArgument, "fresh"},
		{"unverified, promoted", api.AppRunRequest{Image: "unchecked", AllocationID: w.allocID}, api.CodeInvalidArgument, "unverified"},
		{"revoked", api.AppRunRequest{Image: "bad", AllocationID: w.allocID}, api.CodeInvalidArgument, "revoked"},
		{"retired", api.AppRunRequest{Image: "old", AllocationID: w.allocID}, api.CodeInvalidArgument, "retired"},
		{"name in use", api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "web"}, api.CodeConflict, "in use"},
		{"released allocation", api.AppRunRequest{Image: "tiny", AllocationID: released}, api.CodeConflict, "released"},
		{"released slice", api.AppRunRequest{Image: "tiny", AllocationID: releasedSlice}, api.CodeConflict, "released"},
	} {
		before := w.count(t, `SELECT count(*) FROM workloads`) + w.count(t, `SELECT count(*) FROM node_tasks`)
		_, err := w.run(t, w.bob, tt.req)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Code != tt.code || !strings.Contains(ae.Message, tt.says) {
			t.Errorf("%s: %v; want %s naming %q", tt.name, err, tt.code, tt.says)
		}
		if after := w.count(t, `SELECT count(*) FROM workloads`) + w.count(t, `SELECT count(*) FROM node_tasks`); after != before {
			t.Errorf("%s: wrote %d rows", tt.name, after-before)
		}
	}
	// Alice is no member of bob's project: his allocation is not found.
	if _, err := w.run(t, w.alice, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID}); api.CodeOf(err) != api.CodeNotFound {
		t.Errorf("a stranger's run: %v; want not found", err)
	}
}

// TestSettleFollowsTheContainer: start's report (running) queues a status
// long poll; a status report of exit 1 fails the workload with its exit
// code and last lines; another that exits 0 is stopped; a start the node
// could not do is failed with the node's reason.
func TestSettleFollowsTheContainer(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	wl, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	taskID, typ, _ := w.currentTask(t, wl.ID)
	eff := w.settle(t, taskID, typ, reported(t, hostproto.WorkloadReport{WorkloadID: wl.ID, State: api.ContainerRunning, Pulled: true,
		LastLines: []string{"ready"}}))
	if got := w.get(t, wl.ID); got.State != api.WorkloadRunning || !got.Pulled || strings.Join(got.LastLines, "|") != "ready" {
		t.Errorf("after start: %+v", got)
	}
	if len(eff.Events) != 1 || eff.Events[0].Kind != api.EventWorkloadState {
		t.Errorf("events %+v; want one state event", eff.Events)
	}
	statusID, typ, raw := w.currentTask(t, wl.ID)
	var sp hostproto.WorkloadStatusParams
	_ = json.Unmarshal(raw, &sp)
	if typ != api.TaskWorkloadStatus || sp.Wait <= 0 || sp.WorkloadID != wl.ID {
		t.Fatalf("follow-up task %s %+v; want a workload.status long poll", typ, sp)
	}
	// The start task settled again (a retry) changes nothing.
	w.settle(t, taskID, api.TaskWorkloadStart, reported(t, hostproto.WorkloadReport{WorkloadID: wl.ID, State: api.ContainerExited, ExitCode: 3}))
	w.settle(t, statusID, typ, reported(t, hostproto.WorkloadReport{WorkloadID: wl.ID, State: api.ContainerExited, ExitCode: 1,
		LastLines: []string{"line 1", "line 2"}}))
	got := w.get(t, wl.ID)
	if got.State != api.WorkloadFailed || got.ExitCode == nil || *got.ExitCode != 1 || got.Reason != "exited with 1" ||
		strings.Join(got.LastLines, "|") != "line 1|line 2" || got.EndedAt == nil || !got.Pulled {
		t.Errorf("after exit 1: %+v", got)
	}

	ok, _ := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "b"})
	taskID, typ, _ = w.currentTask(t, ok.ID)
	w.settle(t, taskID, typ, reported(t, hostproto.WorkloadReport{WorkloadID: ok.ID, State: api.ContainerExited, ExitCode: 0}))
	if got := w.get(t, ok.ID); got.State != api.WorkloadStopped || *got.ExitCode != 0 {
		t.Errorf("after exit 0: %+v", got)
	}

	broken, _ := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "c"})
	taskID, typ, _ = w.currentTask(t, broken.ID)
	w.settle(t, taskID, typ, hostproto.TaskResult{Status: hostproto.TaskFailed, Phase: "workload_pull", Error: "pull: manifest unknown"})
	if got := w.get(t, broken.ID); got.State != api.WorkloadFailed || got.ExitCode != nil ||
		got.Reason != "the node could not start the workload: workload_pull: pull: manifest unknown" {
		t.Errorf("after a failed start: %+v", got)
	}
}

// TestStopAndRm: stop queues workload.stop and its report ends the
// workload as stopped; a second stop is a conflict; rm frees the name at
// once (a new workload may take it) and queues the container's removal.
func TestStopAndRm(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	wl, _ := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "web"})
	taskID, typ, _ := w.currentTask(t, wl.ID)
	w.settle(t, taskID, typ, reported(t, hostproto.WorkloadReport{WorkloadID: wl.ID, State: api.ContainerRunning}))
	stop := func(actorBob bool) error {
		return w.tx(t, func(tx pgx.Tx) error {
			actor := w.bob
			if !actorBob {
				actor = w.alice
			}
			_, _, err := workloads.Stop(ctx, tx, actor, wl.ID, workloads.Config{}, t0)
			return err
		})
	}
	if err := stop(false); api.CodeOf(err) != api.CodeNotFound {
		t.Errorf("alice stops bob's workload: %v; want not found", err)
	}
	if err := stop(true); err != nil {
		t.Fatal(err)
	}
	if got := w.get(t, wl.ID); !got.Stopping || got.State != api.WorkloadRunning {
		t.Errorf("after stop asked: %+v", got)
	}
	if err := stop(true); api.CodeOf(err) != api.CodeConflict {
		t.Errorf("second stop: %v; want conflict", err)
	}
	var stopTask string
	if err := w.pool.QueryRow(ctx, `SELECT id FROM node_tasks WHERE type = $1`, api.TaskWorkloadStop).Scan(&stopTask); err != nil {
		t.Fatal(err)
	}
	w.settle(t, stopTask, api.TaskWorkloadStop, reported(t, hostproto.WorkloadReport{WorkloadID: wl.ID, State: api.ContainerExited, ExitCode: 143,
		LastLines: []string{"got SIGTERM"}}))
	if got := w.get(t, wl.ID); got.State != api.WorkloadStopped || got.Reason != "stopped" || *got.ExitCode != 143 || got.Stopping {
		t.Errorf("after stop: %+v", got)
	}
	if err := w.tx(t, func(tx pgx.Tx) error {
		_, _, err := workloads.Rm(ctx, tx, w.bob, wl.ID, workloads.Config{}, t0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n := w.count(t, `SELECT count(*) FROM node_tasks WHERE type = $1 AND params->>'remove' = 'true'`, api.TaskWorkloadStop); n != 1 {
		t.Errorf("%d removal tasks; want 1", n)
	}
	if _, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "web"}); err != nil {
		t.Errorf("the removed workload's name: %v; want free", err)
	}
	list, err := workloads.List(ctx, w.pool, w.bob, api.AppPsRequest{Project: w.project})
	if err != nil || len(list) != 1 || list[0].ID == wl.ID {
		t.Errorf("app ps: %+v, %v; want only the new one", list, err)
	}
	all, _ := workloads.List(ctx, w.pool, w.bob, api.AppPsRequest{Project: w.project, All: true})
	if len(all) != 2 {
		t.Errorf("app ps --all: %d; want 2", len(all))
	}
}

// TestReleasedAllocationStopsItsWorkloads: once the allocation is
// released, a status the node cannot answer (the user is gone) ends the
// workload as stopped with the reason, not failed.
func TestReleasedAllocationStopsItsWorkloads(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	wl, _ := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID})
	taskID, typ, _ := w.currentTask(t, wl.ID)
	w.settle(t, taskID, typ, reported(t, hostproto.WorkloadReport{WorkloadID: wl.ID, State: api.ContainerRunning}))
	if _, err := w.pool.Exec(context.Background(), `UPDATE allocations SET state = 'released' WHERE id = $1`, w.allocID); err != nil {
		t.Fatal(err)
	}
	statusID, typ, _ := w.currentTask(t, wl.ID)
	w.settle(t, statusID, typ, hostproto.TaskResult{Status: hostproto.TaskFailed, Error: "open the allocation's environment: no such user"})
	if got := w.get(t, wl.ID); got.State != api.WorkloadStopped || got.Reason != "its allocation was released" || got.ExitCode != nil {
		t.Errorf("after release: %+v; want stopped with the reason", got)
	}
}
