package controld

import (
	"context"

	"github.com/gpuaas/gpuaas/controld/jobs"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/logstream"
)

// withJobRetries gives the job settlers this server's jobs configuration:
// a lost job retried by its settler (controld/jobs retry.go,
// docs/decisions/0045-job-retries.md) is started again with the
// server's log bound, its secrets sealed with the server's key, and its
// log numbered on from what LOGS holds (read through s.js when the
// settler runs: it is set after the settlers are made).
func (s *Server) withJobRetries(settlers tasks.Settlers) {
	cfg := s.jobsConfig()
	cfg.LogNext = func(ctx context.Context, subject string) (int64, error) {
		return logstream.NextSeq(ctx, s.js, subject)
	}
	for typ, settle := range jobs.Settlers(cfg) {
		settlers[typ] = settle
	}
}
