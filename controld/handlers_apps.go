package controld

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/workloads"
	"github.com/gpuaas/gpuaas/internal/api"
)

// appsEndpoints are workloads' (controld/workloads, docs/apps.md).
func (s *Server) appsEndpoints() []endpointDef {
	return []endpointDef{
		mutation(s, api.OpAppRun, s.appRun),
		query(s, api.OpAppPs, s.appPs),
		query(s, api.OpAppGet, s.appGet),
		mutation(s, api.OpAppStop, s.appStop),
		mutation(s, api.OpAppRm, s.appRm),
		query(s, api.OpAppLogs, s.appLogs),
	}
}

// workloadsConfig is how controld follows workloads: the defaults.
var workloadsConfig = workloads.Config{}

// workloadsConfig is workloadsConfig with this server's bound of a
// workload's log: the same as a job's (--job-log-max-bytes).
func (s *Server) workloadsConfig() workloads.Config {
	c := workloadsConfig
	c.LogMaxBytes = s.cfg.Streams.JobLogMaxBytes
	return c
}

func (s *Server) appRun(_ context.Context, c *call, req api.AppRunRequest) (work[api.Workload], error) {
	if err := workloads.Check(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Workload, mutate.Effect, error) {
		w, eff, err := workloads.Run(ctx, tx, c.actor(), req, s.workloadsConfig(), s.now())
		return &w, eff, err
	}, nil
}

func (s *Server) appPs(ctx context.Context, c *call, req api.AppPsRequest) (*api.AppPsResponse, error) {
	if req.Project == "" && req.AllocationID == "" {
		req.Project = c.project
	}
	list, err := workloads.List(ctx, s.pool, c.actor(), req)
	if err != nil {
		return nil, err
	}
	if err := s.withImageTrust(ctx, list); err != nil {
		return nil, err
	}
	return &api.AppPsResponse{Workloads: list}, nil
}

func (s *Server) appGet(ctx context.Context, c *call, req api.WorkloadRef) (*api.Workload, error) {
	w, err := workloads.Get(ctx, s.pool, c.actor(), req.ID)
	if err != nil {
		return nil, err
	}
	one := []api.Workload{w}
	if err := s.withImageTrust(ctx, one); err != nil {
		return nil, err
	}
	return &one[0], nil
}

// withImageTrust tells each workload of list its image's trust now, so
// that one running an image revoked since says so (images owns the trust).
func (s *Server) withImageTrust(ctx context.Context, list []api.Workload) error {
	if len(list) == 0 {
		return nil
	}
	ids := make([]string, len(list))
	for i, w := range list {
		ids[i] = w.ImageID
	}
	trust, err := images.Trusts(ctx, s.pool, ids)
	if err != nil {
		return err
	}
	for i := range list {
		list[i].ImageTrust = trust[list[i].ImageID]
	}
	return nil
}

func (s *Server) appStop(_ context.Context, c *call, req api.WorkloadRef) (work[api.Workload], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.Workload, mutate.Effect, error) {
		w, eff, err := workloads.Stop(ctx, tx, c.actor(), req.ID, workloadsConfig, s.now())
		return &w, eff, err
	}, nil
}

func (s *Server) appRm(_ context.Context, c *call, req api.WorkloadRef) (work[api.Workload], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.Workload, mutate.Effect, error) {
		w, eff, err := workloads.Rm(ctx, tx, c.actor(), req.ID, workloadsConfig, s.now())
		return &w, eff, err
	}, nil
}

// appLogs reads a workload's log from LOGS as jobLogs reads a job's
// (handlers_logs.go): authorized as app.get, long-poll, stateless.
func (s *Server) appLogs(ctx context.Context, c *call, req api.AppLogsRequest) (*api.AppLogsResponse, error) {
	var w api.Workload
	r, err := s.readLogs(ctx, "workload", api.JobLogsRequest(req), func(ctx context.Context) (subject string, ended bool, err error) {
		w, subject, ended, err = workloads.LogSource(ctx, s.pool, c.actor(), req.ID)
		return subject, ended, err
	})
	if err != nil {
		return nil, err
	}
	r.State = w.State
	return (*api.AppLogsResponse)(r), nil
}
