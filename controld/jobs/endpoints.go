package jobs

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/logstream"
)

// LogReader answers one call of a log API with the page src's lines give,
// long-polling up to req.Wait; kind names the log in errors ("job",
// "workload"). The server's reads LOGS through its own JetStream
// connection (docs/decisions/0022-logs-in-jetstream.md); job.logs and
// app.logs (workloads.Deps) share it.
type LogReader func(ctx context.Context, kind string, req api.JobLogsRequest, src logstream.Source) (*api.JobLogsResponse, error)

// Deps are what jobs' endpoints need of the server.
type Deps struct {
	// DB serves the reads outside a mutation's transaction.
	DB store.Querier
	// Config is the server's: its bound of a job's log and its secrets
	// key (docs/jobs.md "Secrets").
	Config Config
	Logs   LogReader
	Now    func() time.Time
}

// Endpoints are jobs' (docs/jobs.md, docs/decisions/0069-domain-endpoints.md).
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Mutation(api.OpJobCreate, h.create),
		endpoint.Query(api.OpJobGet, h.get),
		endpoint.Query(api.OpJobList, h.list),
		endpoint.Mutation(api.OpJobCancel, h.cancel),
		endpoint.Query(api.OpJobLogs, h.logs),
	}
}

type handlers struct{ Deps }

func (h handlers) create(_ context.Context, r *endpoint.Request, req api.JobCreateRequest) (endpoint.Work[api.Job], error) {
	if err := Check(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Job, mutate.Effect, error) {
		j, eff, err := Create(ctx, tx, alloc.ActorOf(r.Principal), req, h.Config, h.Now())
		return &j, eff, err
	}, nil
}

func (h handlers) get(ctx context.Context, r *endpoint.Request, req api.JobRef) (*api.Job, error) {
	return endpoint.Pointer(Get(ctx, h.DB, alloc.ActorOf(r.Principal), req.ID))
}

func (h handlers) list(ctx context.Context, r *endpoint.Request, req api.JobListRequest) (*api.JobListResponse, error) {
	if req.Project == "" {
		req.Project = r.Project
	}
	list, err := List(ctx, h.DB, alloc.ActorOf(r.Principal), req)
	if err != nil {
		return nil, err
	}
	return &api.JobListResponse{Jobs: list}, nil
}

func (h handlers) cancel(_ context.Context, r *endpoint.Request, req api.JobRef) (endpoint.Work[api.Job], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.Job, mutate.Effect, error) {
		j, eff, err := Cancel(ctx, tx, alloc.ActorOf(r.Principal), req.ID, h.Config, h.Now())
		return &j, eff, err
	}, nil
}

// logs is job.logs: the job's state is read before its lines, as a job
// seen ended has published every line it will (hostd/tasks/joblog.go).
func (h handlers) logs(ctx context.Context, r *endpoint.Request, req api.JobLogsRequest) (*api.JobLogsResponse, error) {
	var j api.Job
	resp, err := h.Logs(ctx, "job", req, func(ctx context.Context) (string, bool, error) {
		var err error
		if j, err = Get(ctx, h.DB, alloc.ActorOf(r.Principal), req.ID); err != nil || j.NodeID == "" {
			return "", api.JobFinal(j.State), err
		}
		return logstream.Subject(j.NodeID, logstream.KindJob, j.ID), api.JobFinal(j.State), nil
	})
	if err != nil {
		return nil, err
	}
	resp.State = j.State
	return resp, nil
}
