package workloads_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/controld/workloads"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// settleAt applies a result of task taskID at now, as controld/hosts
// would.
func (w *world) settleAt(t *testing.T, taskID, typ string, res hostproto.TaskResult, now time.Time) {
	t.Helper()
	err := w.tx(t, func(tx pgx.Tx) error {
		_, err := workloads.Settlers(workloads.Config{})[typ](context.Background(), tx,
			tasks.Outcome{TaskID: taskID, NodeID: "n-1", Type: typ, Result: res, Now: now})
		return err
	})
	if err != nil {
		t.Fatalf("settle %s: %v", typ, err)
	}
}

// statusParams is the workload.status that follows the workload now.
func (w *world) statusParams(t *testing.T, id string) (string, hostproto.WorkloadStatusParams) {
	t.Helper()
	taskID, typ, raw := w.currentTask(t, id)
	var p hostproto.WorkloadStatusParams
	if err := json.Unmarshal(raw, &p); err != nil || typ != api.TaskWorkloadStatus {
		t.Fatalf("task %s %s: %v; want a workload.status", typ, raw, err)
	}
	return taskID, p
}

// TestReadinessStateMachine (docs/apps.md, "Readiness"): a workload with
// a probe stays starting while its container runs and its probe has not
// passed, each workload.status carrying the probe and waiting no longer
// than its deadline; the report of the probe passing makes it running
// (ready_at), after which statuses carry no probe. Another whose probe
// never passes is failed at its deadline (from when controld first saw
// its container running) with "not ready after D: <the probe's last
// error>" and the container's last lines, and its container is stopped
// (a workload.stop is queued).
func TestReadinessStateMachine(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	probe := &api.WorkloadProbe{Port: 8080, HTTPPath: "/ready", StartDeadline: time.Minute}
	t1 := t0.Add(time.Minute)
	report := func(id, state string, ready bool, perr string, lines ...string) hostproto.TaskResult {
		return reported(t, hostproto.WorkloadReport{WorkloadID: id, State: state, Ready: ready, ProbeError: perr, LastLines: lines})
	}

	ok, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "ok", Readiness: probe})
	if err != nil {
		t.Fatal(err)
	}
	taskID, typ, _ := w.currentTask(t, ok.ID)
	w.settleAt(t, taskID, typ, report(ok.ID, api.ContainerRunning, false, ""), t1)
	if got := w.get(t, ok.ID); got.State != api.WorkloadStarting || got.ReadyAt != nil || got.Readiness == nil || *got.Readiness != *probe {
		t.Fatalf("after start, not probed yet: %+v; want starting with its probe", got)
	}
	taskID, sp := w.statusParams(t, ok.ID)
	if sp.Probe == nil || *sp.Probe != *probe || sp.Wait <= 0 || sp.Wait > time.Minute {
		t.Fatalf("status after start: %+v; want the probe, a wait within the deadline", sp)
	}
	w.settleAt(t, taskID, api.TaskWorkloadStatus, report(ok.ID, api.ContainerRunning, false, "tcp connect: refused"), t1.Add(20*time.Second))
	taskID, sp = w.statusParams(t, ok.ID)
	if got := w.get(t, ok.ID); got.State != api.WorkloadStarting || sp.Probe == nil || sp.Wait > 40*time.Second {
		t.Fatalf("not ready 20s in: %+v, status %+v; want starting, probed, waiting at most the 40s left", got, sp)
	}
	t2 := t1.Add(30 * time.Second)
	w.settleAt(t, taskID, api.TaskWorkloadStatus, report(ok.ID, api.ContainerRunning, true, "", "listening"), t2)
	got := w.get(t, ok.ID)
	if got.State != api.WorkloadRunning || got.ReadyAt == nil || !got.ReadyAt.Equal(t2) || strings.Join(got.LastLines, "|") != "listening" {
		t.Fatalf("after its probe passed: %+v; want running, ready at %s", got, t2)
	}
	taskID, sp = w.statusParams(t, ok.ID)
	if sp.Probe != nil {
		t.Errorf("status of a ready workload: %+v; want no probe", sp)
	}
	// Later reports without a probe keep it running.
	w.settleAt(t, taskID, api.TaskWorkloadStatus, report(ok.ID, api.ContainerRunning, false, ""), t2.Add(2*time.Minute))
	if got := w.get(t, ok.ID); got.State != api.WorkloadRunning {
		t.Errorf("a ready workload's next status: %s; want running", got.State)
	}

	late, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "late", Readiness: probe})
	if err != nil {
		t.Fatal(err)
	}
	taskID, typ, _ = w.currentTask(t, late.ID)
	w.settleAt(t, taskID, typ, report(late.ID, api.ContainerRunning, false, ""), t1)
	taskID, _ = w.statusParams(t, late.ID)
	w.settleAt(t, taskID, api.TaskWorkloadStatus, report(late.ID, api.ContainerRunning, false, "GET /ready on port 8080: connection refused"), t1.Add(59*time.Second))
	if got := w.get(t, late.ID); got.State != api.WorkloadStarting {
		t.Fatalf("1s before its deadline: %s; want starting", got.State)
	}
	taskID, _ = w.statusParams(t, late.ID)
	stops := w.count(t, `SELECT count(*) FROM node_tasks WHERE type = $1`, api.TaskWorkloadStop)
	w.settleAt(t, taskID, api.TaskWorkloadStatus, report(late.ID, api.ContainerRunning, false,
		"GET /ready on port 8080: connection refused", "serving as uid 0", "still loading"), t1.Add(time.Minute))
	got = w.get(t, late.ID)
	if got.State != api.WorkloadFailed || got.Reason != "not ready after 1m0s: GET /ready on port 8080: connection refused" ||
		strings.Join(got.LastLines, "|") != "serving as uid 0|still loading" || got.EndedAt == nil || got.ExitCode != nil {
		t.Errorf("at its deadline: %+v; want failed, the probe's error, its last lines", got)
	}
	var stop hostproto.WorkloadStopParams
	var raw []byte
	if err := w.pool.QueryRow(context.Background(), `SELECT params FROM node_tasks WHERE type = $1 ORDER BY created_at DESC, id DESC LIMIT 1`,
		api.TaskWorkloadStop).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(raw, &stop)
	if n := w.count(t, `SELECT count(*) FROM node_tasks WHERE type = $1`, api.TaskWorkloadStop); n != stops+1 || stop.WorkloadID != late.ID || stop.Remove {
		t.Errorf("workload.stop tasks %d (was %d), last %+v; want one more, stopping %s", n, stops, stop, late.ID)
	}
	// The stop's report leaves it failed, with its reason.
	var stopID string
	if err := w.pool.QueryRow(context.Background(), `SELECT id FROM node_tasks WHERE type = $1 ORDER BY created_at DESC, id DESC LIMIT 1`,
		api.TaskWorkloadStop).Scan(&stopID); err != nil {
		t.Fatal(err)
	}
	w.settleAt(t, stopID, api.TaskWorkloadStop, reported(t, hostproto.WorkloadReport{WorkloadID: late.ID, State: api.ContainerExited, ExitCode: 143}), t1.Add(2*time.Minute))
	if got := w.get(t, late.ID); got.State != api.WorkloadFailed || !strings.HasPrefix(got.Reason, "not ready after 1m0s") {
		t.Errorf("after the stop's report: %s %q; want failed, not ready", got.State, got.Reason)
	}
}

// TestRunRecordsTheWorkloadsGPUs: a workload's GPU count is its own —
// all of the allocation's by default, none with no_gpus (workload.start
// then says no_gpus) — and bad probes and GPU requests are refused
// naming the field, nothing written.
func TestRunRecordsTheWorkloadsGPUs(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	all, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "all"})
	if err != nil || all.GPUs != 8 {
		t.Fatalf("default: %+v, %v; want the allocation's 8 GPUs", all, err)
	}
	none, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "none", NoGPUs: true, ShmBytes: 1 << 30})
	if err != nil || none.GPUs != 0 {
		t.Fatalf("no_gpus: %+v, %v; want 0 GPUs", none, err)
	}
	_, _, raw := w.currentTask(t, none.ID)
	var p hostproto.WorkloadStartParams
	if err := json.Unmarshal(raw, &p); err != nil || !p.NoGPUs || len(p.GPUs) != 0 || p.ShmBytes != 1<<30 {
		t.Errorf("start of a workload without GPUs: %+v, %v; want no_gpus, 1Gi of shm", p, err)
	}
	for _, tt := range []struct {
		name string
		req  api.AppRunRequest
		says string
	}{
		{"no_gpus with a count", api.AppRunRequest{NoGPUs: true, GPUs: 2}, "gpus: 2 with no_gpus"},
		{"probe port 80", api.AppRunRequest{Readiness: &api.WorkloadProbe{Port: 80, StartDeadline: time.Minute}}, "readiness.port: 80"},
		{"probe deadline 0", api.AppRunRequest{Readiness: &api.WorkloadProbe{Port: 8080}}, "readiness.start_deadline: 0s"},
		{"probe deadline over 1h", api.AppRunRequest{Readiness: &api.WorkloadProbe{Port: 8080, StartDeadline: 2 * time.Hour}}, "readiness.start_deadline: 2h0m0s"},
		{"probe path", api.AppRunRequest{Readiness: &api.WorkloadProbe{Port: 8080, HTTPPath: "ready", StartDeadline: time.Minute}}, "readiness.http_path"},
		{"shm over 256Gi", api.AppRunRequest{ShmBytes: 257 << 30}, "shm_bytes"},
	} {
		before := w.count(t, `SELECT count(*) FROM workloads`) + w.count(t, `SELECT count(*) FROM node_tasks`)
		tt.req.Image, tt.req.AllocationID = "tiny", w.allocID
		_, err := w.run(t, w.bob, tt.req)
		if api.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: %v; want invalid_argument naming %q", tt.name, err, tt.says)
		}
		if after := w.count(t, `SELECT count(*) FROM workloads`) + w.count(t, `SELECT count(*) FROM node_tasks`); after != before {
			t.Errorf("%s: %d rows after the refusal; want %d", tt.name, after, before)
		}
	}
}
