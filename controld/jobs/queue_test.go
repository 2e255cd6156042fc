package jobs_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/jobs"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/nodeseal"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// queuedAlloc is an allocation of bob's waiting in line for capacity.
func (w *world) queuedAlloc(t *testing.T) string {
	t.Helper()
	a := storetest.Allocation(t, w.pool, api.Allocation{ProjectID: w.project, UserID: w.bob.UserID, SKU: "h100-baremetal",
		Shape: api.ShapeBaremetal, GPUs: 8, State: api.AllocRequested, Queued: true})
	return a.ID
}

// setAlloc moves an allocation to state, on node n-1, as its owner would.
func (w *world) setAlloc(t *testing.T, id, state, reason string) {
	t.Helper()
	if _, err := w.pool.Exec(context.Background(), `UPDATE allocations SET state = $2, reason = $3, node_id = 'n-1',
		queued = false, version = version + 1 WHERE id = $1`, id, state, reason); err != nil {
		t.Fatal(err)
	}
}

func (w *world) advance(t *testing.T, allocID string) {
	t.Helper()
	if err := jobs.AdvanceAllocation(context.Background(), w.pool, allocID, jobs.Config{}, t0); err != nil {
		t.Fatalf("advance %s: %v", allocID, err)
	}
}

func (w *world) job(t *testing.T, id string) api.Job {
	t.Helper()
	j, err := jobs.Get(context.Background(), w.pool, w.bob, id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestQueuedJobStartsOnceWhenItsAllocationIsActive: job.create with
// queue on an allocation in line makes a queued job with no node, no task
// and its place; Advance leaves it while the allocation waits or
// provisions, starts it (one job.start on the node) once it is active,
// and never a second time however often it runs again.
func TestQueuedJobStartsOnceWhenItsAllocationIsActive(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ahead, queued := w.queuedAlloc(t), w.queuedAlloc(t)
	if _, err := w.create(t, api.JobCreateRequest{AllocationID: queued, Run: "true"}); api.CodeOf(err) != api.CodeConflict {
		t.Fatalf("without queue: %v; want conflict", err)
	}
	released := w.queuedAlloc(t)
	w.setAlloc(t, released, api.AllocReleased, "gone")
	if _, err := w.create(t, api.JobCreateRequest{AllocationID: released, Run: "true", Queue: true}); api.CodeOf(err) != api.CodeConflict {
		t.Fatalf("queued on a released allocation: %v; want conflict", err)
	}
	if now, err := w.create(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "true", Queue: true}); err != nil || now.State != api.JobStarting {
		t.Fatalf("queue on an active allocation: %+v, %v; want starting at once", now, err)
	}
	j, err := w.create(t, api.JobCreateRequest{AllocationID: queued, Run: "exit 3", Queue: true})
	if err != nil {
		t.Fatal(err)
	}
	if j.State != api.JobQueued || j.NodeID != "" || j.QueuePosition != 2 {
		t.Fatalf("created %+v; want queued, no node, 2nd in line", j)
	}
	if n := w.count(t, `SELECT count(*) FROM node_tasks WHERE params->>'job_id' = $1`, j.ID); n != 0 {
		t.Errorf("%d node tasks for a queued job; want 0", n)
	}
	if _, err := w.create(t, api.JobCreateRequest{AllocationID: queued, Run: "true", Queue: true}); api.CodeOf(err) != api.CodeConflict {
		t.Errorf("a second job queued on the same allocation: %v; want conflict", err)
	}
	list, err := jobs.List(context.Background(), w.pool, w.bob, api.JobListRequest{AllocationID: queued})
	if err != nil || len(list) != 1 || list[0].QueuePosition != 2 {
		t.Fatalf("list: %v %+v; want the job, 2nd in line", err, list)
	}
	w.setAlloc(t, ahead, api.AllocProvisioning, "") // the one ahead is placed: ours moves up
	if got := w.job(t, j.ID); got.QueuePosition != 1 {
		t.Errorf("after the one ahead was placed: place %d; want 1", got.QueuePosition)
	}
	w.advance(t, queued)
	w.setAlloc(t, queued, api.AllocProvisioning, "")
	w.advance(t, queued)
	if got := w.job(t, j.ID); got.State != api.JobQueued || got.QueuePosition != 0 {
		t.Fatalf("allocation provisioning: %+v; want queued, placed (no place in line)", got)
	}
	w.setAlloc(t, queued, api.AllocActive, "provisioned")
	for range 3 {
		w.advance(t, queued)
	}
	if err := jobs.CatchUp(context.Background(), w.pool, jobs.Config{}, func() time.Time { return t0 }); err != nil {
		t.Fatal(err)
	}
	got := w.job(t, j.ID)
	if got.State != api.JobStarting || got.NodeID != "n-1" {
		t.Fatalf("allocation active: %+v; want starting on n-1", got)
	}
	if _, typ := w.currentTask(t, j.ID); typ != api.TaskJobStart {
		t.Errorf("task %s; want %s", typ, api.TaskJobStart)
	}
	if n := w.count(t, `SELECT count(*) FROM node_tasks WHERE type = $1 AND params->>'job_id' = $2`, api.TaskJobStart, j.ID); n != 1 {
		t.Errorf("%d job.start tasks; want exactly 1", n)
	}
	if n := w.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'job.start_queued' AND target_id = $1`, j.ID); n != 1 {
		t.Errorf("%d job.start_queued audit rows; want 1", n)
	}
}

// TestQueuedJobEndsWhenItsAllocationIsGivenUp: an allocation that failed
// (e.g. left the line unfunded) fails its queued job, one released
// (cancelled by its owner) cancels it; neither ever started.
func TestQueuedJobEndsWhenItsAllocationIsGivenUp(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, tc := range []struct{ allocState, jobState, text string }{
		{api.AllocFailed, api.JobFailed, "failed before the job started: project cannot pay"},
		{api.AllocReleased, api.JobCancelled, "was released before the job started: left the line"},
	} {
		a := w.queuedAlloc(t)
		j, err := w.create(t, api.JobCreateRequest{AllocationID: a, Run: "true", Queue: true})
		if err != nil {
			t.Fatal(err)
		}
		reason := map[string]string{api.AllocFailed: "project cannot pay", api.AllocReleased: "left the line"}[tc.allocState]
		w.setAlloc(t, a, tc.allocState, reason)
		w.advance(t, a)
		got := w.job(t, j.ID)
		if got.State != tc.jobState || !strings.Contains(got.Reason, tc.text) || got.ExitCode != nil || got.EndedAt == nil {
			t.Errorf("allocation %s: job %+v; want %s with %q, no exit code", tc.allocState, got, tc.jobState, tc.text)
		}
	}
	if n := w.count(t, `SELECT count(*) FROM node_tasks`); n != 0 {
		t.Errorf("%d node tasks; want 0", n)
	}
}

// TestCancelQueuedJobReleasesItsAllocation: job.cancel of a queued job
// cancels it at once and gives its allocation back (it leaves the line,
// never charged); with release: keep the allocation stays in line.
func TestCancelQueuedJobReleasesItsAllocation(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, release := range []string{"on-exit", "keep"} {
		a := w.queuedAlloc(t)
		j, err := w.create(t, api.JobCreateRequest{AllocationID: a, Run: "true", Queue: true, Release: release})
		if err != nil {
			t.Fatal(err)
		}
		var got api.Job
		err = w.tx(t, func(tx pgx.Tx) error {
			var err error
			got, _, err = jobs.Cancel(context.Background(), tx, w.bob, j.ID, jobs.Config{}, t0)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != api.JobCancelled || !strings.Contains(got.Reason, "before it started") || got.EndedAt == nil {
			t.Errorf("%s: cancelled %+v; want cancelled before it started", release, got)
		}
		var state string
		var queued bool
		if err := w.pool.QueryRow(context.Background(), `SELECT state, queued FROM allocations WHERE id = $1`, a).Scan(&state, &queued); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"on-exit": api.AllocReleased, "keep": api.AllocRequested}[release]
		if state != want {
			t.Errorf("%s: allocation %s; want %s", release, state, want)
		}
		if n := w.count(t, `SELECT count(*) FROM usage_charges WHERE allocation_id = $1`, a); n != 0 {
			t.Errorf("%s: %d meters; want none (never charged)", release, n)
		}
	}
	if n := w.count(t, `SELECT count(*) FROM node_tasks`); n != 0 {
		t.Errorf("%d node tasks; want 0 (nothing reached a node)", n)
	}
}

// TestQueuedJobSealsSecretsWhenItStarts: a queued job's secret: values
// are checked at create (a missing one refused, nothing written) and
// sealed to the node only when the job starts; one removed meanwhile
// fails the job with the reason and releases its allocation (on-exit),
// with no job.start.
func TestQueuedJobSealsSecretsWhenItStarts(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	priv, k, value := withSecret(t, w, "hf-token")
	cfg := jobs.Config{Secrets: k}
	a := w.queuedAlloc(t)
	if _, err := w.createWith(t, api.JobCreateRequest{AllocationID: a, Run: "true", Queue: true,
		Secrets: map[string]string{"T": "nope"}}, k); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Fatalf("queued job naming a missing secret: %v; want invalid_argument", err)
	}
	j, err := w.createWith(t, api.JobCreateRequest{AllocationID: a, Run: "true", Queue: true,
		Secrets: map[string]string{"HF_TOKEN": "hf-token"}}, k)
	if err != nil {
		t.Fatal(err)
	}
	w.setAlloc(t, a, api.AllocActive, "provisioned")
	if err := jobs.AdvanceAllocation(context.Background(), w.pool, a, cfg, t0); err != nil {
		t.Fatal(err)
	}
	var raw []byte
	if err := w.pool.QueryRow(context.Background(), `SELECT t.params FROM node_tasks t JOIN jobs j ON j.task_id = t.id WHERE j.id = $1`,
		j.ID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var p hostproto.JobStartParams
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	o, err := nodeseal.NewOpener(priv.Seed())
	if err != nil {
		t.Fatal(err)
	}
	if opened, err := o.Open(p.SealedEnv); err != nil || string(opened) != `["HF_TOKEN=`+value+`"]` {
		t.Fatalf("the node opens %q, %v; want HF_TOKEN=<value>", opened, err)
	}

	// A secret removed while the job waited.
	b := w.queuedAlloc(t)
	j2, err := w.createWith(t, api.JobCreateRequest{AllocationID: b, Run: "true", Queue: true,
		Secrets: map[string]string{"HF_TOKEN": "hf-token"}}, k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.pool.Exec(context.Background(), `DELETE FROM project_secrets`); err != nil {
		t.Fatal(err)
	}
	w.setAlloc(t, b, api.AllocActive, "provisioned")
	if err := jobs.AdvanceAllocation(context.Background(), w.pool, b, cfg, t0); err != nil {
		t.Fatal(err)
	}
	got := w.job(t, j2.ID)
	if got.State != api.JobFailed || !strings.Contains(got.Reason, "could not be started") || !strings.Contains(got.Reason, "hf-token") {
		t.Errorf("job whose secret went: %+v; want failed naming the secret", got)
	}
	var state string
	if err := w.pool.QueryRow(context.Background(), `SELECT state FROM allocations WHERE id = $1`, b).Scan(&state); err != nil || state != api.AllocReleasing {
		t.Errorf("its allocation: %s, %v; want releasing (on-exit)", state, err)
	}
	if n := w.count(t, `SELECT count(*) FROM node_tasks WHERE params->>'job_id' = $1`, j2.ID); n != 0 {
		t.Errorf("%d tasks for it; want 0", n)
	}
}

// TestActivationWaitsForAQueuedJobsCreate: job.create holds its
// allocation's row (share lock) until it commits, so an activation that
// comes meanwhile waits, and its alloc.state event (written with it) is
// after the job exists: the job cannot be left queued on an active
// allocation with the event already seen.
func TestActivationWaitsForAQueuedJobsCreate(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	a := w.queuedAlloc(t)
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	j, _, err := jobs.Create(ctx, tx, w.bob, api.JobCreateRequest{AllocationID: a, Run: "true", Queue: true}, jobs.Config{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	activated := make(chan error, 1)
	go func() {
		_, err := w.pool.Exec(ctx, `UPDATE allocations SET state = 'active', node_id = 'n-1', queued = false WHERE id = $1`, a)
		activated <- err
	}()
	testutil.Eventually(t, "the activation to wait for the create", func() bool {
		select {
		case err := <-activated:
			t.Fatalf("the activation went through while job.create was open (%v)", err)
		default:
		}
		return w.count(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND query LIKE 'UPDATE allocations SET state = ''active''%'`) == 1
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-activated; err != nil {
		t.Fatal(err)
	}
	w.advance(t, a) // as the activation's event does
	if got := w.job(t, j.ID); got.State != api.JobStarting {
		t.Errorf("job %s; want starting", got.State)
	}
}
