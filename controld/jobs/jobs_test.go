package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/jobs"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

func TestCreateQueuesJobStart(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	j, err := w.create(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "exit 7", Env: map[string]string{"TOKEN": "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	if j.State != api.JobStarting || j.Release != "on-exit" || j.NodeID != "n-1" || len(j.EnvNames) != 1 {
		t.Errorf("got %+v; want starting on n-1, release on-exit, one env name", j)
	}
	_, typ := w.currentTask(t, j.ID)
	if typ != api.TaskJobStart {
		t.Errorf("task %s; want %s", typ, api.TaskJobStart)
	}
	// The task carries the value; what users and events see does not.
	if n := w.count(t, `SELECT count(*) FROM outbox_events WHERE payload::text LIKE '%s3cret%'`); n != 0 {
		t.Errorf("%d events carry the env value; want 0", n)
	}
	// One job at a time per allocation.
	if _, err := w.create(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "true"}); api.CodeOf(err) != api.CodeConflict {
		t.Errorf("second job: got %v; want conflict", err)
	}
}

func TestCreateRefusesAndWritesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	provisioning := w.allocation(t, api.AllocProvisioning)
	tests := []struct {
		name string
		req  api.JobCreateRequest
		want api.Code
		text string
	}{
		{"no run", api.JobCreateRequest{AllocationID: w.allocID}, api.CodeInvalidArgument, "run"},
		{"no allocation", api.JobCreateRequest{Run: "true"}, api.CodeInvalidArgument, "allocation_id"},
		{"bad release", api.JobCreateRequest{AllocationID: w.allocID, Run: "true", Release: "never"}, api.CodeInvalidArgument, "release"},
		{"bad env name", api.JobCreateRequest{AllocationID: w.allocID, Run: "true", Env: map[string]string{"1A": "x"}}, api.CodeInvalidArgument, "env.1A"},
		{"negative timeout", api.JobCreateRequest{AllocationID: w.allocID, Run: "true", TimeoutSeconds: -1}, api.CodeInvalidArgument, "timeout_seconds"},
		{"unknown allocation", api.JobCreateRequest{AllocationID: "a-000000000000", Run: "true"}, api.CodeNotFound, "not found"},
		{"not active", api.JobCreateRequest{AllocationID: provisioning, Run: "true"}, api.CodeConflict, "provisioning"},
	}
	for _, tt := range tests {
		_, err := w.create(t, tt.req)
		if api.CodeOf(err) != tt.want || !strings.Contains(err.Error(), tt.text) {
			t.Errorf("%s: got %v; want %s naming %q", tt.name, err, tt.want, tt.text)
		}
	}
	if n := w.count(t, `SELECT count(*) FROM jobs`) + w.count(t, `SELECT count(*) FROM node_tasks`); n != 0 {
		t.Errorf("%d rows written by refused creates; want 0", n)
	}
	// A non-member learns nothing.
	j, err := w.create(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Get(context.Background(), w.pool, w.alice, j.ID); api.CodeOf(err) != api.CodeNotFound {
		t.Errorf("alice's get: got %v; want not found", err)
	}
}

// TestJobEndsWithItsExitCodeAndReleases: a job that exits 7 is failed
// with exit code 7, and (release: on-exit) its allocation is releasing
// with the reason "job finished".
func TestJobEndsWithItsExitCodeAndReleases(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	j, err := w.create(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "exit 7"})
	if err != nil {
		t.Fatal(err)
	}
	task, typ := w.currentTask(t, j.ID)
	start := t0.Add(time.Second)
	// Still running after job.start's wait: a job.wait follows it.
	w.settle(t, task, typ, reported(t, hostproto.JobReport{JobID: j.ID, Phase: api.JobPhaseRun, StartedAt: &start}))
	got, _ := jobs.Get(context.Background(), w.pool, w.bob, j.ID)
	if got.State != api.JobRunning || got.StartedAt == nil {
		t.Fatalf("after start: %+v; want running", got)
	}
	task, typ = w.currentTask(t, j.ID)
	if typ != api.TaskJobWait {
		t.Fatalf("follow-up task %s; want %s", typ, api.TaskJobWait)
	}
	end := t0.Add(time.Minute)
	eff := w.settle(t, task, typ, reported(t, hostproto.JobReport{JobID: j.ID, Ended: true, Phase: api.JobPhaseRun, ExitCode: 7,
		StartedAt: &start, EndedAt: &end, Output: "bye\x00", OutputBytes: 4}))
	got, _ = jobs.Get(context.Background(), w.pool, w.bob, j.ID)
	if got.State != api.JobFailed || got.ExitCode == nil || *got.ExitCode != 7 || got.EndedAt == nil {
		t.Fatalf("after end: %+v; want failed with 7", got)
	}
	// The output (a NUL replaced: Postgres text takes none) in job.get, not in lists.
	if got.Output != "bye\uFFFD" || got.OutputBytes != 4 {
		t.Errorf("output %q (%d bytes); want %q", got.Output, got.OutputBytes, "bye\uFFFD")
	}
	if list, err := jobs.List(context.Background(), w.pool, w.bob, api.JobListRequest{}); err != nil || len(list) != 1 || list[0].Output != "" {
		t.Errorf("list: %v %+v; want the job without its output", err, list)
	}
	var state, reason string
	if err := w.pool.QueryRow(context.Background(), `SELECT state, reason FROM allocations WHERE id = $1`, w.allocID).Scan(&state, &reason); err != nil {
		t.Fatal(err)
	}
	if state != api.AllocReleasing || reason != api.JobReleaseReason {
		t.Errorf("allocation %s (%q); want releasing (%q)", state, reason, api.JobReleaseReason)
	}
	if len(eff.Events) != 2 {
		t.Errorf("%d events; want the job's and the allocation's", len(eff.Events))
	}
	// A late report of the same task changes nothing.
	w.settle(t, task, typ, reported(t, hostproto.JobReport{JobID: j.ID, Ended: true, ExitCode: 0}))
	if again, _ := jobs.Get(context.Background(), w.pool, w.bob, j.ID); again.State != api.JobFailed {
		t.Errorf("late report moved it to %s", again.State)
	}
}

// TestJobLostWhenHostdRestarts: the task following a job was interrupted
// (hostd restarted): the job is lost with the reason, and its allocation
// released (docs/decisions/0015-jobs-on-the-node.md).
func TestJobLostWhenHostdRestarts(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	j, err := w.create(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "sleep 1000"})
	if err != nil {
		t.Fatal(err)
	}
	task, typ := w.currentTask(t, j.ID)
	w.settle(t, task, typ, hostproto.TaskResult{Status: hostproto.TaskInterrupted, Error: "hostd stopped while the task ran"})
	got, _ := jobs.Get(context.Background(), w.pool, w.bob, j.ID)
	if got.State != api.JobLost || !strings.Contains(got.Reason, "hostd stopped") || got.ExitCode != nil {
		t.Fatalf("got %+v; want lost with the reason, no exit code", got)
	}
	var state string
	_ = w.pool.QueryRow(context.Background(), `SELECT state FROM allocations WHERE id = $1`, w.allocID).Scan(&state)
	if state != api.AllocReleasing {
		t.Errorf("allocation %s; want releasing", state)
	}
}

func TestKeepLeavesTheAllocationAndCancel(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	j, err := w.create(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "sleep 1000", Release: "keep"})
	if err != nil {
		t.Fatal(err)
	}
	var cancelled api.Job
	err = w.tx(t, func(tx pgx.Tx) error {
		var err error
		cancelled, _, err = jobs.Cancel(context.Background(), tx, w.bob, j.ID, jobs.Config{}, t0)
		return err
	})
	if err != nil || !cancelled.Cancelling {
		t.Fatalf("cancel: %v %+v", err, cancelled)
	}
	if n := w.count(t, `SELECT count(*) FROM node_tasks WHERE type = $1`, api.TaskJobStop); n != 1 {
		t.Errorf("%d job.stop tasks; want 1", n)
	}
	task, typ := w.currentTask(t, j.ID)
	w.settle(t, task, typ, reported(t, hostproto.JobReport{JobID: j.ID, Ended: true, Phase: api.JobPhaseRun, ExitCode: 143, Signal: "SIGTERM", Cancelled: true}))
	got, _ := jobs.Get(context.Background(), w.pool, w.bob, j.ID)
	if got.State != api.JobCancelled {
		t.Errorf("got %s; want cancelled", got.State)
	}
	var state string
	_ = w.pool.QueryRow(context.Background(), `SELECT state FROM allocations WHERE id = $1`, w.allocID).Scan(&state)
	if state != api.AllocActive {
		t.Errorf("allocation %s; want active (release: keep)", state)
	}
	err = w.tx(t, func(tx pgx.Tx) error {
		_, _, err := jobs.Cancel(context.Background(), tx, w.bob, j.ID, jobs.Config{}, t0)
		return err
	})
	if api.CodeOf(err) != api.CodeConflict {
		t.Errorf("cancel of an ended job: got %v; want conflict", err)
	}
}
