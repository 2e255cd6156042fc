package jobs_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/jobs"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/nodeseal"
)

// startParamsOf reads the params of a job.start task.
func (w *world) startParamsOf(t *testing.T, taskID string) hostproto.JobStartParams {
	t.Helper()
	var raw []byte
	if err := w.pool.QueryRow(context.Background(), `SELECT params FROM node_tasks WHERE id = $1`, taskID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var p hostproto.JobStartParams
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func (w *world) allocState(t *testing.T, id string) string {
	t.Helper()
	var state string
	if err := w.pool.QueryRow(context.Background(), `SELECT state FROM allocations WHERE id = $1`, id).Scan(&state); err != nil {
		t.Fatal(err)
	}
	return state
}

var interrupted = hostproto.TaskResult{Status: hostproto.TaskInterrupted, Error: "hostd stopped while the task ran"}

// TestLostJobIsRetriedOnItsAllocation: a job with retries: 1 that hostd
// loses (its job.wait interrupted by a restart) is started again on its
// allocation as attempt 2 — one job.start, whatever number of times the
// lost report is delivered — audited with an event, and its allocation
// stays; attempt 2 ends with its own exit code and the job succeeds.
func TestLostJobIsRetriedOnItsAllocation(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	j, err := w.create(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "train", Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	if j.Attempt != 1 || j.Retries != 1 {
		t.Fatalf("created %+v; want attempt 1, retries 1", j)
	}
	task, typ := w.currentTask(t, j.ID)
	start := t0.Add(time.Second)
	w.settle(t, task, typ, reported(t, hostproto.JobReport{JobID: j.ID, Phase: api.JobPhaseRun, StartedAt: &start}))
	wait, typ := w.currentTask(t, j.ID)
	eff := w.settle(t, wait, typ, interrupted)
	got := w.job(t, j.ID)
	if got.State != api.JobStarting || got.Attempt != 2 || !strings.Contains(got.Reason, "attempt 1 lost: hostd stopped") ||
		got.ExitCode != nil {
		t.Fatalf("after the lost report: %+v; want starting, attempt 2, the reason", got)
	}
	if len(eff.Events) != 1 || eff.Events[0].Kind != api.EventJobState {
		t.Errorf("events %+v; want the job's state", eff.Events)
	}
	retryTask, typ := w.currentTask(t, j.ID)
	if typ != api.TaskJobStart {
		t.Fatalf("task after the retry: %s; want %s", typ, api.TaskJobStart)
	}
	p := w.startParamsOf(t, retryTask)
	if p.JobID != j.ID || p.Attempt != 2 || !strings.Contains(p.AttemptReason, "hostd stopped") || p.Run != "train" {
		t.Errorf("retry's params %+v; want attempt 2 of the same job, with the reason", p)
	}
	if w.allocState(t, w.allocID) != api.AllocActive {
		t.Errorf("allocation %s; want active while the job is retried", w.allocState(t, w.allocID))
	}
	if n := w.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'job.retry' AND target_id = $1
		AND detail->>'attempt' = '2'`, j.ID); n != 1 {
		t.Errorf("%d job.retry audit rows for attempt 2; want 1", n)
	}
	// The lost report delivered again (a resend, another replica) starts
	// nothing more.
	w.settle(t, wait, api.TaskJobWait, interrupted)
	if n := w.count(t, `SELECT count(*) FROM node_tasks WHERE type = $1 AND params->>'job_id' = $2`, api.TaskJobStart, j.ID); n != 2 {
		t.Errorf("%d job.start tasks; want 2 (attempts 1 and 2)", n)
	}
	if again := w.job(t, j.ID); again.Attempt != 2 || again.State != api.JobStarting {
		t.Errorf("after the repeat: %+v; want attempt 2 starting", again)
	}
	end := t0.Add(time.Minute)
	w.settle(t, retryTask, api.TaskJobStart, reported(t, hostproto.JobReport{JobID: j.ID, Ended: true, Phase: api.JobPhaseRun,
		ExitCode: 0, StartedAt: &start, EndedAt: &end}))
	done := w.job(t, j.ID)
	if done.State != api.JobSucceeded || done.Attempt != 2 || done.ExitCode == nil || *done.ExitCode != 0 || done.Reason != "" {
		t.Errorf("after attempt 2: %+v; want succeeded, attempt 2, exit 0, no reason", done)
	}
	if w.allocState(t, w.allocID) != api.AllocReleasing {
		t.Errorf("allocation %s; want releasing (release: on-exit)", w.allocState(t, w.allocID))
	}
}

// TestRetriesExhaustedEndsLost: attempt 2 of a job with retries: 1 lost
// too ends the job lost, saying its retries are used up, and releases
// its allocation; a job with no retries is lost at once, as before.
func TestRetriesExhaustedEndsLost(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	j, err := w.create(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "train", Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		task, typ := w.currentTask(t, j.ID)
		w.settle(t, task, typ, interrupted)
	}
	got := w.job(t, j.ID)
	if got.State != api.JobLost || got.Attempt != 2 || !strings.Contains(got.Reason, "hostd stopped") ||
		!strings.Contains(got.Reason, "attempt 2 of 2, its retries (1) are used up") {
		t.Fatalf("got %+v; want lost at attempt 2 with the reason", got)
	}
	if w.allocState(t, w.allocID) != api.AllocReleasing {
		t.Errorf("allocation %s; want releasing", w.allocState(t, w.allocID))
	}
	if n := w.count(t, `SELECT count(*) FROM node_tasks WHERE type = $1 AND params->>'job_id' = $2`, api.TaskJobStart, j.ID); n != 2 {
		t.Errorf("%d job.start tasks; want 2", n)
	}
}

// TestOnlyLostJobsAreRetried: the job's own non-zero exit, its timeout
// and a cancel end it whatever its retries; a lost job whose allocation
// is no longer active is not retried, and says so.
func TestOnlyLostJobsAreRetried(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ended := func(rep hostproto.JobReport, cancel bool) api.Job {
		t.Helper()
		a := w.allocation(t, api.AllocActive)
		j, err := w.create(t, api.JobCreateRequest{AllocationID: a, Run: "x", Retries: 3, Release: "keep"})
		if err != nil {
			t.Fatal(err)
		}
		if cancel {
			if err := w.tx(t, func(tx pgx.Tx) error {
				_, _, err := jobs.Cancel(context.Background(), tx, w.bob, j.ID, jobs.Config{}, t0)
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		task, typ := w.currentTask(t, j.ID)
		rep.JobID, rep.Ended = j.ID, true
		w.settle(t, task, typ, reported(t, rep))
		return w.job(t, j.ID)
	}
	start := t0
	for name, tt := range map[string]struct {
		rep    hostproto.JobReport
		cancel bool
		state  string
	}{
		"exit 7":  {hostproto.JobReport{Phase: api.JobPhaseRun, ExitCode: 7, StartedAt: &start}, false, api.JobFailed},
		"timeout": {hostproto.JobReport{Phase: api.JobPhaseRun, ExitCode: 143, Signal: "SIGTERM", TimedOut: true, StartedAt: &start}, false, api.JobFailed},
		"cancel":  {hostproto.JobReport{Phase: api.JobPhaseRun, ExitCode: 143, Signal: "SIGTERM", Cancelled: true, StartedAt: &start}, true, api.JobCancelled},
		// Lost while being cancelled: the user asked it to end.
		"lost while cancelling": {hostproto.JobReport{Unknown: true, Reason: "hostd does not know the job"}, true, api.JobLost},
	} {
		got := ended(tt.rep, tt.cancel)
		if got.State != tt.state || got.Attempt != 1 {
			t.Errorf("%s: %+v; want %s at attempt 1, not retried", name, got, tt.state)
		}
	}
	if n := w.count(t, `SELECT count(*) FROM node_tasks WHERE type = $1`, api.TaskJobStart); n != 4 {
		t.Errorf("%d job.start tasks; want 4: one per job, none retried", n)
	}
	// Lost after its allocation failed: nowhere to retry it.
	a := w.allocation(t, api.AllocActive)
	j, err := w.create(t, api.JobCreateRequest{AllocationID: a, Run: "x", Retries: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.pool.Exec(context.Background(), `UPDATE allocations SET state = 'failed' WHERE id = $1`, a); err != nil {
		t.Fatal(err)
	}
	task, typ := w.currentTask(t, j.ID)
	w.settle(t, task, typ, hostproto.TaskResult{Status: hostproto.TaskFailed, Error: "no node took the task within 15m0s"})
	got := w.job(t, j.ID)
	if got.State != api.JobLost || got.Attempt != 1 || !strings.Contains(got.Reason, "not retried: allocation "+a+" is failed") {
		t.Errorf("lost on a failed allocation: %+v; want lost, not retried, with the reason", got)
	}
}

// TestCreateRefusesBadRetries: retries outside 0–10 is refused naming
// the field, and nothing is written.
func TestCreateRefusesBadRetries(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, n := range []int{-1, 11} {
		_, err := w.create(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "x", Retries: n})
		if api.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), "retries") {
			t.Errorf("retries %d: got %v; want invalid_argument naming retries", n, err)
		}
	}
	if n := w.count(t, `SELECT count(*) FROM jobs`); n != 0 {
		t.Errorf("%d jobs written; want 0", n)
	}
}

// TestRetrySealsSecretsToTheNodeAgain: attempt 2 of a job naming a
// project secret gets it sealed to the node again (with controld's key:
// the settlers are built with the server's jobs config); without the
// key the job cannot be started again and ends lost, saying so.
func TestRetrySealsSecretsToTheNodeAgain(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	priv, k, value := withSecret(t, w, "hf-token")
	settleWith := func(cfg jobs.Config, jobID string) {
		t.Helper()
		task, typ := w.currentTask(t, jobID)
		if err := w.tx(t, func(tx pgx.Tx) error {
			_, err := jobs.Settlers(cfg)[typ](context.Background(), tx,
				tasks.Outcome{TaskID: task, NodeID: "n-1", Type: typ, Result: interrupted, Now: t0.Add(time.Minute)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	j, err := w.createWith(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "x", Retries: 1,
		Secrets: map[string]string{"HF_TOKEN": "hf-token"}}, k)
	if err != nil {
		t.Fatal(err)
	}
	settleWith(jobs.Config{Secrets: k}, j.ID)
	task, _ := w.currentTask(t, j.ID)
	p := w.startParamsOf(t, task)
	o, err := nodeseal.NewOpener(priv.Seed())
	if err != nil {
		t.Fatal(err)
	}
	if opened, err := o.Open(p.SealedEnv); p.Attempt != 2 || err != nil || string(opened) != `["HF_TOKEN=`+value+`"]` {
		t.Fatalf("attempt %d: the node opens %q, %v; want attempt 2 with HF_TOKEN=<value>", p.Attempt, opened, err)
	}

	other := w.allocation(t, api.AllocActive)
	j2, err := w.createWith(t, api.JobCreateRequest{AllocationID: other, Run: "x", Retries: 1,
		Secrets: map[string]string{"HF_TOKEN": "hf-token"}}, k)
	if err != nil {
		t.Fatal(err)
	}
	settleWith(jobs.Config{}, j2.ID)
	if got := w.job(t, j2.ID); got.State != api.JobLost || !strings.Contains(got.Reason, "not retried: the job could not be started again") {
		t.Errorf("retry without the secrets key: %+v; want lost, not retried, with the reason", got)
	}
}
