package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// queueEnv is a real controld (Postgres, NATS with auth, its outbox relay
// and consumers) with one 8-GPU bare-metal node and no hostd: what a node
// would report is applied to the database as controld/hosts applies it
// (the change and its events in one transaction).
type queueEnv struct {
	*controldtest.Env
	c *api.Client
	// pool is the test's own: it outlives a controld restart.
	pool *pgxpool.Pool
}

func startQueueEnv(t testing.TB) *queueEnv {
	t.Helper()
	env := controldtest.Start(t, controldtest.Options{Nodes: []node.Spec{controldtest.BaremetalNode("bm-1", "H100")}})
	pool, err := store.Open(context.Background(), env.DSN, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &queueEnv{Env: env, c: env.Client(env.AdminToken), pool: pool}
}

// inTx runs fn and enqueues its events in one transaction.
func (e *queueEnv) inTx(t testing.TB, fn func(ctx context.Context, tx pgx.Tx) ([]outbox.Event, error)) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		events, err := fn(ctx, tx)
		if err != nil {
			return err
		}
		for _, ev := range events {
			if _, err := outbox.Enqueue(ctx, tx, time.Now(), ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// provisioned applies a successful provisioning report of allocation id.
func (e *queueEnv) provisioned(t testing.TB, id string) {
	t.Helper()
	e.inTx(t, func(ctx context.Context, tx pgx.Tx) ([]outbox.Event, error) {
		return alloc.ProvisionDone(ctx, tx, id, hostproto.TaskSucceeded, "", time.Now())
	})
}

// freed applies the node's report that allocation id (releasing) is
// cleaned up.
func (e *queueEnv) freed(t testing.TB, id string) {
	t.Helper()
	e.inTx(t, func(ctx context.Context, tx pgx.Tx) ([]outbox.Event, error) {
		events, _, err := alloc.ReleaseDone(ctx, tx, id, hostproto.TaskSucceeded, "", time.Now())
		return events, err
	})
}

// freeAndPlace frees allocation id (freed), then places the line as the
// queue loop does.
func (e *queueEnv) freeAndPlace(t testing.TB, id string) {
	t.Helper()
	e.freed(t, id)
	// controld's queue loop may place it first.
	if _, err := alloc.PlaceQueued(context.Background(), e.pool, alloc.Rules{}, time.Now); err != nil {
		t.Fatalf("place queued: %v", err)
	}
}

// fillAndQueue takes the node with an active allocation and queues n
// more behind it, each with a job queued on it.
func (e *queueEnv) fillAndQueue(t testing.TB, n int) (first string, queued []string, jobIDs []string) {
	t.Helper()
	ctx := context.Background()
	a, err := e.c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	e.provisioned(t, a.ID)
	for i := range n {
		q, err := e.c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8, Queue: true})
		if err != nil || q.State != api.AllocRequested || !q.Queued {
			t.Fatalf("queued allocation: %+v, %v", q, err)
		}
		j, err := e.c.JobCreate(ctx, api.JobCreateRequest{AllocationID: q.ID, Run: "exit 3", Queue: true})
		if err != nil {
			t.Fatal(err)
		}
		if j.State != api.JobQueued || j.QueuePosition != i+1 || j.NodeID != "" {
			t.Fatalf("job %d: %+v; want queued, %d in line, no node", i, j, i+1)
		}
		queued, jobIDs = append(queued, q.ID), append(jobIDs, j.ID)
	}
	return a.ID, queued, jobIDs
}

// waitJob waits for the job to reach state.
func (e *queueEnv) waitJob(t testing.TB, id, state string) api.Job {
	t.Helper()
	var j *api.Job
	testutil.Eventually(t, "job "+id+" "+state, func() bool {
		var err error
		j, err = e.c.JobGet(context.Background(), id)
		return err == nil && j.State == state
	})
	return *j
}

// startTasks counts the job.start tasks of a job.
func (e *queueEnv) startTasks(t testing.TB, jobID string) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM node_tasks WHERE type = $1
		AND params->>'job_id' = $2`, api.TaskJobStart, jobID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestQueuedJobStartsByItself: with controld running, a job queued on an
// allocation in line starts (one job.start, on the allocation's node)
// once the allocation is placed and active, with no client there; a
// queued job whose allocation its owner releases ends cancelled with the
// reason; job.list shows the places in line.
func TestQueuedJobStartsByItself(t *testing.T) {
	t.Parallel()
	e := startQueueEnv(t)
	ctx := context.Background()
	first, queued, jobIDs := e.fillAndQueue(t, 2)
	list, err := e.c.JobList(ctx, api.JobListRequest{})
	if err != nil || len(list.Jobs) != 2 || list.Jobs[0].QueuePosition != 2 || list.Jobs[1].QueuePosition != 1 {
		t.Fatalf("job list: %v %+v; want both queued, 2nd and 1st", err, list)
	}
	// The second gives up: its allocation leaves the line.
	if _, err := e.c.AllocRelease(ctx, api.AllocReleaseRequest{ID: queued[1]}); err != nil {
		t.Fatal(err)
	}
	gaveUp := e.waitJob(t, jobIDs[1], api.JobCancelled)
	if !strings.Contains(gaveUp.Reason, "released before the job started") || gaveUp.ExitCode != nil {
		t.Errorf("given-up job %+v; want cancelled with the reason, no exit code", gaveUp)
	}
	// Capacity frees: the first in line is placed, provisions, is active.
	if _, err := e.c.AllocRelease(ctx, api.AllocReleaseRequest{ID: first}); err != nil {
		t.Fatal(err)
	}
	e.freeAndPlace(t, first)
	testutil.Eventually(t, "the allocation placed", func() bool {
		a, err := e.c.AllocGet(ctx, queued[0])
		return err == nil && a.State == api.AllocProvisioning
	})
	if j, err := e.c.JobGet(ctx, jobIDs[0]); err != nil || j.State != api.JobQueued || j.QueuePosition != 0 {
		t.Errorf("job of the allocation provisioning: %+v, %v; want queued, placed", j, err)
	}
	e.provisioned(t, queued[0])
	got := e.waitJob(t, jobIDs[0], api.JobStarting)
	a, err := e.c.AllocGet(ctx, queued[0])
	if err != nil || got.NodeID == "" || got.NodeID != a.NodeID {
		t.Errorf("started job on %q, allocation on %q (%v); want its allocation's node", got.NodeID, a.NodeID, err)
	}
	if n := e.startTasks(t, jobIDs[0]); n != 1 {
		t.Errorf("%d job.start tasks; want 1", n)
	}
	if n := e.startTasks(t, jobIDs[1]); n != 0 {
		t.Errorf("%d job.start tasks for the given-up job; want 0", n)
	}
}

// TestQueuedJobStartsAfterControldRestart: the allocation becomes active
// while no controld runs (its events wait in the outbox); the controld
// that starts next starts the job, exactly once.
func TestQueuedJobStartsAfterControldRestart(t *testing.T) {
	t.Parallel()
	e := startQueueEnv(t)
	ctx := context.Background()
	first, queued, jobIDs := e.fillAndQueue(t, 1)
	if _, err := e.c.AllocRelease(ctx, api.AllocReleaseRequest{ID: first}); err != nil {
		t.Fatal(err)
	}
	e.Restart(t, func() {
		e.freeAndPlace(t, first)
		e.provisioned(t, queued[0])
	})
	e.waitJob(t, jobIDs[0], api.JobStarting)
	// A second restart redelivers nothing that starts it again.
	e.Restart(t, nil)
	if _, err := e.c.JobGet(ctx, jobIDs[0]); err != nil {
		t.Fatal(err)
	}
	if n := e.startTasks(t, jobIDs[0]); n != 1 {
		t.Errorf("%d job.start tasks; want exactly 1", n)
	}
}
