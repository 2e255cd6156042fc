package controld

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/jobs"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/internal/api"
)

// jobsEndpoints are jobs' (controld/jobs, docs/jobs.md).
func (s *Server) jobsEndpoints() []endpointDef {
	return []endpointDef{
		mutation(s, api.OpJobCreate, s.jobCreate),
		query(s, api.OpJobGet, s.jobGet),
		query(s, api.OpJobList, s.jobList),
		mutation(s, api.OpJobCancel, s.jobCancel),
		query(s, api.OpJobLogs, s.jobLogs), // handlers_logs.go
	}
}

// jobsConfig is how controld follows jobs: the defaults (controld/jobs).
var jobsConfig = jobs.Config{}

func (s *Server) jobCreate(_ context.Context, c *call, req api.JobCreateRequest) (work[api.Job], error) {
	if err := jobs.Check(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Job, mutate.Effect, error) {
		cfg := s.jobsConfig()
		cfg.Secrets = s.cfg.SecretsKey // secret: values (docs/jobs.md "Secrets")
		j, eff, err := jobs.Create(ctx, tx, c.actor(), req, cfg, s.now())
		return &j, eff, err
	}, nil
}

func (s *Server) jobGet(ctx context.Context, c *call, req api.JobRef) (*api.Job, error) {
	return pointer(jobs.Get(ctx, s.pool, c.actor(), req.ID))
}

func (s *Server) jobList(ctx context.Context, c *call, req api.JobListRequest) (*api.JobListResponse, error) {
	if req.Project == "" {
		req.Project = c.project
	}
	list, err := jobs.List(ctx, s.pool, c.actor(), req)
	if err != nil {
		return nil, err
	}
	return &api.JobListResponse{Jobs: list}, nil
}

func (s *Server) jobCancel(_ context.Context, c *call, req api.JobRef) (work[api.Job], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.Job, mutate.Effect, error) {
		j, eff, err := jobs.Cancel(ctx, tx, c.actor(), req.ID, jobsConfig, s.now())
		return &j, eff, err
	}, nil
}
