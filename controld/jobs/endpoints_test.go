package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/jobs"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/logstream"
)

// served is w with jobs' endpoints over it, the clock at t0 plus an hour.
type served struct {
	*world
	endpointtest.Harness
	clock time.Time
}

func serveJobs(t *testing.T, cfg jobs.Config, logs jobs.LogReader) *served {
	t.Helper()
	w := newWorld(t)
	s := &served{world: w, clock: t0.Add(time.Hour)}
	now := func() time.Time { return s.clock }
	s.Harness = endpointtest.Serve(w.pool, now, jobs.Endpoints(jobs.Deps{DB: w.pool, Config: cfg, Logs: logs, Now: now}))
	return s
}

func as(a alloc.Actor, project string) *endpoint.Request {
	return endpointtest.As(a.UserID, a.Role, project)
}

// TestCreateEndpointUsesTheServersConfig: job.create starts the job with
// the server's bound of a job's log (Deps.Config, which hostd enforces)
// at the injected clock, in one transaction with its audit row.
func TestCreateEndpointUsesTheServersConfig(t *testing.T) {
	t.Parallel()
	s := serveJobs(t, jobs.Config{LogMaxBytes: 123456}, nil)
	ctx := context.Background()
	j, err := endpointtest.Mutate[api.Job](ctx, s.Run, s.Find(t, api.EndpointJobCreate), as(s.bob, ""),
		api.JobCreateRequest{AllocationID: s.allocID, Run: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.count(t, `SELECT count(*) FROM jobs j JOIN node_tasks t ON t.id = j.task_id
		WHERE j.id = $1 AND (t.params->>'log_max_bytes')::bigint = 123456 AND j.created_at = $2`, j.ID, s.clock); n != 1 {
		t.Errorf("job %s: %d start tasks with log_max_bytes 123456 created at %s; want 1", j.ID, n, s.clock)
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'job.create' AND target_id = $1`, j.ID); n != 1 {
		t.Errorf("%d job.create audit rows; want 1", n)
	}
	// A refusal of the request's own checks runs no transaction.
	if _, err := endpointtest.Mutate[api.Job](ctx, s.Run, s.Find(t, api.EndpointJobCreate), as(s.bob, ""),
		api.JobCreateRequest{AllocationID: s.allocID}); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Errorf("no run: got %v; want invalid_argument", err)
	}
	if n := s.count(t, `SELECT count(*) FROM idempotency_keys`); n != 1 {
		t.Errorf("%d idempotency records; want the create's alone", n)
	}
}

// TestListEndpointTakesTheProjectHeader: job.list without a project in
// its body lists the Gpuaas-Project header's, which the caller must be
// able to read; without either it lists the caller's own jobs.
func TestListEndpointTakesTheProjectHeader(t *testing.T) {
	t.Parallel()
	s := serveJobs(t, jobs.Config{}, nil)
	ctx := context.Background()
	j, err := s.create(t, api.JobCreateRequest{AllocationID: s.allocID, Run: "true"})
	if err != nil {
		t.Fatal(err)
	}
	list := s.Find(t, api.EndpointJobList)
	got, err := endpointtest.Read[api.JobListResponse](ctx, list, as(s.bob, s.project), api.JobListRequest{})
	if err != nil || len(got.Jobs) != 1 || got.Jobs[0].ID != j.ID {
		t.Fatalf("bob's list in his project: got %+v, %v; want job %s", got, err, j.ID)
	}
	if _, err := endpointtest.Read[api.JobListResponse](ctx, list, as(s.alice, s.project), api.JobListRequest{}); err == nil {
		t.Error("alice's list with bob's project in the header: got no error; want a refusal (she is no member)")
	}
	got, err = endpointtest.Read[api.JobListResponse](ctx, list, as(s.alice, ""), api.JobListRequest{})
	if err != nil || len(got.Jobs) != 0 {
		t.Errorf("alice's own jobs: got %+v, %v; want none", got, err)
	}
}

// TestLogsEndpointReadsTheJobFirst: job.logs asks the log reader for
// the job's subject on its node, says whether the job has ended, and
// answers with its state; a caller who cannot see the job is told
// not_found by the reader's source.
func TestLogsEndpointReadsTheJobFirst(t *testing.T) {
	t.Parallel()
	var asked []string
	reader := func(ctx context.Context, kind string, req api.JobLogsRequest, src logstream.Source) (*api.JobLogsResponse, error) {
		subject, ended, err := src(ctx)
		if err != nil {
			return nil, err
		}
		asked = append(asked, kind+" "+subject)
		return &api.JobLogsResponse{Ended: ended}, nil
	}
	s := serveJobs(t, jobs.Config{}, reader)
	ctx := context.Background()
	j, err := s.create(t, api.JobCreateRequest{AllocationID: s.allocID, Run: "true"})
	if err != nil {
		t.Fatal(err)
	}
	logs := s.Find(t, api.EndpointJobLogs)
	got, err := endpointtest.Read[api.JobLogsResponse](ctx, logs, as(s.bob, ""), api.JobLogsRequest{ID: j.ID})
	if err != nil {
		t.Fatal(err)
	}
	want := "job " + logstream.Subject("n-1", logstream.KindJob, j.ID)
	if got.State != api.JobStarting || got.Ended || len(asked) != 1 || asked[0] != want {
		t.Errorf("got state %s, ended %v, asked %q; want starting, not ended, asked %q", got.State, got.Ended, asked, want)
	}
	if _, err := endpointtest.Read[api.JobLogsResponse](ctx, logs, as(s.alice, ""), api.JobLogsRequest{ID: j.ID}); api.CodeOf(err) != api.CodeNotFound {
		t.Errorf("alice: got %v; want not_found", err)
	}
}
