package backend

import (
	"context"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Work is what the dashboard needs of controld about what runs on
// allocations: jobs (docs/jobs.md) and workloads (docs/apps.md).
type Work interface {
	// ListJobs lists jobs, newest first, as `gpuaas job list` does: an
	// allocation's, a project's, or the caller's (at most JobListLimit
	// when req sets no limit).
	ListJobs(ctx context.Context, req api.JobListRequest) ([]api.Job, error)
	// JobLogs reads a page of a job's log, as `gpuaas job logs` does.
	JobLogs(ctx context.Context, req api.JobLogsRequest) (*api.JobLogsResponse, error)
	// ListWorkloads lists allocID's workloads (removed ones left out).
	ListWorkloads(ctx context.Context, allocID string) ([]api.Workload, error)
	// ListApps lists the published apps a workload of project (an id or
	// a name; "": the caller's default) may run now: app.list, the call
	// and rules of `gpuaas app list` — the platform's and the project's
	// own, promoted, their image promoted and verified (docs/apps.md,
	// "Publishing apps").
	ListApps(ctx context.Context, project string) ([]api.App, error)
	// RunApp runs an app or an image on an allocation: app.run, the
	// endpoint of `gpuaas app run`, with an idempotency key of its own.
	RunApp(ctx context.Context, req api.AppRunRequest) (*api.Workload, error)
}

// JobListLimit is how many jobs the jobs view lists (the newest).
const JobListLimit = 200

func (b *apiBackend) ListJobs(ctx context.Context, req api.JobListRequest) ([]api.Job, error) {
	if req.Limit == 0 {
		req.Limit = JobListLimit
	}
	resp, err := b.c.JobList(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.Jobs, nil
}

func (b *apiBackend) JobLogs(ctx context.Context, req api.JobLogsRequest) (*api.JobLogsResponse, error) {
	return b.c.JobLogs(ctx, req)
}

func (b *apiBackend) ListWorkloads(ctx context.Context, allocID string) ([]api.Workload, error) {
	resp, err := b.c.AppPs(ctx, api.AppPsRequest{AllocationID: allocID})
	if err != nil {
		return nil, err
	}
	return resp.Workloads, nil
}

func (b *apiBackend) ListApps(ctx context.Context, project string) ([]api.App, error) {
	resp, err := b.c.AppList(ctx, api.AppListRequest{Project: project})
	if err != nil {
		return nil, err
	}
	return resp.Apps, nil
}

func (b *apiBackend) RunApp(ctx context.Context, req api.AppRunRequest) (*api.Workload, error) {
	return b.c.AppRun(ctx, req, api.WithIdempotencyKey(api.NewIdempotencyKey()))
}
