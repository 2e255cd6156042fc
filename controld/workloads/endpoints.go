package workloads

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/jobs"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Deps is what the workloads' endpoints use of the server.
type Deps struct {
	DB store.Querier
	// Config is how controld follows workloads, with the server's bound
	// of a workload's log (--job-log-max-bytes, as a job's).
	Config Config
	// Logs reads a workload's log as job.logs reads a job's: controld's
	// root has the one reader both share (its JetStream connection), so
	// it is handed in.
	Logs jobs.LogReader
	Now  func() time.Time
}

// Endpoints are workloads' (docs/apps.md): running an app and following
// what runs.
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Mutation(api.OpAppRun, h.run),
		endpoint.Query(api.OpAppPs, h.ps),
		endpoint.Query(api.OpAppGet, h.get),
		endpoint.Mutation(api.OpAppStop, h.stop),
		endpoint.Mutation(api.OpAppRm, h.rm),
		endpoint.Query(api.OpAppLogs, h.logs),
	}
}

type handlers struct{ Deps }

func (h handlers) run(_ context.Context, r *endpoint.Request, req api.AppRunRequest) (endpoint.Work[api.Workload], error) {
	if err := Check(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Workload, mutate.Effect, error) {
		w, eff, err := Run(ctx, tx, alloc.ActorOf(r.Principal), req, h.Config, h.Now())
		return &w, eff, err
	}, nil
}

func (h handlers) ps(ctx context.Context, r *endpoint.Request, req api.AppPsRequest) (*api.AppPsResponse, error) {
	if req.Project == "" && req.AllocationID == "" {
		req.Project = r.Project
	}
	list, err := List(ctx, h.DB, alloc.ActorOf(r.Principal), req)
	if err != nil {
		return nil, err
	}
	if err := h.withImageTrust(ctx, list); err != nil {
		return nil, err
	}
	return &api.AppPsResponse{Workloads: list}, nil
}

func (h handlers) get(ctx context.Context, r *endpoint.Request, req api.WorkloadRef) (*api.Workload, error) {
	w, err := Get(ctx, h.DB, alloc.ActorOf(r.Principal), req.ID)
	if err != nil {
		return nil, err
	}
	one := []api.Workload{w}
	if err := h.withImageTrust(ctx, one); err != nil {
		return nil, err
	}
	return &one[0], nil
}

// withImageTrust tells each workload of list its image's trust now, so
// that one running an image revoked since says so (images owns the trust).
func (h handlers) withImageTrust(ctx context.Context, list []api.Workload) error {
	if len(list) == 0 {
		return nil
	}
	ids := make([]string, len(list))
	for i, w := range list {
		ids[i] = w.ImageID
	}
	trust, err := images.Trusts(ctx, h.DB, ids)
	if err != nil {
		return err
	}
	for i := range list {
		list[i].ImageTrust = trust[list[i].ImageID]
	}
	return nil
}

func (h handlers) stop(_ context.Context, r *endpoint.Request, req api.WorkloadRef) (endpoint.Work[api.Workload], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.Workload, mutate.Effect, error) {
		w, eff, err := Stop(ctx, tx, alloc.ActorOf(r.Principal), req.ID, h.Config, h.Now())
		return &w, eff, err
	}, nil
}

func (h handlers) rm(_ context.Context, r *endpoint.Request, req api.WorkloadRef) (endpoint.Work[api.Workload], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.Workload, mutate.Effect, error) {
		w, eff, err := Rm(ctx, tx, alloc.ActorOf(r.Principal), req.ID, h.Config, h.Now())
		return &w, eff, err
	}, nil
}

// logs reads a workload's log from LOGS as job.logs reads a job's:
// authorized as app.get, long-poll, stateless.
func (h handlers) logs(ctx context.Context, r *endpoint.Request, req api.AppLogsRequest) (*api.AppLogsResponse, error) {
	var w api.Workload
	page, err := h.Logs(ctx, "workload", api.JobLogsRequest(req), func(ctx context.Context) (subject string, ended bool, err error) {
		w, subject, ended, err = LogSource(ctx, h.DB, alloc.ActorOf(r.Principal), req.ID)
		return subject, ended, err
	})
	if err != nil {
		return nil, err
	}
	page.State = w.State
	return (*api.AppLogsResponse)(page), nil
}
