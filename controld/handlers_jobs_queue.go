package controld

import (
	"context"

	"github.com/gpuaas/gpuaas/controld/jobs"
)

// jobsConfig is how controld follows jobs: the defaults (controld/jobs).
var jobsConfig = jobs.Config{}

// runJobQueue starts queued jobs when their allocations become active and
// ends those whose allocations were given up (controld/jobs RunQueue,
// docs/decisions/0034-queued-jobs-start-themselves.md).
func (s *Server) runJobQueue(ctx context.Context) error {
	cfg := s.jobsConfig()
	return jobs.RunQueue(ctx, s.pool, s.js, cfg, s.cfg.Now, s.cfg.Log)
}
