package controld

import (
	"context"
	"time"

	"github.com/gpuaas/gpuaas/controld/idle"
)

// newIdleRunner is idle release's singleton loop (controld/idle); its
// endpoints are idle.Endpoints.
func (s *Server) newIdleRunner() (*idle.Runner, error) {
	return idle.NewRunner(idle.Config{Settings: s.cfg.Idle, Pool: s.pool, Mutations: s.mut, Released: s.kickQueue,
		Mailer: s.billing.Config().Mailer,
		Now:    s.cfg.Now, Log: s.cfg.Log.With("loop", "idle")})
}

// IdleTick runs the idle evaluator once now (for tests).
func (s *Server) IdleTick(ctx context.Context) (idle.TickResult, error) {
	return s.idle.Tick(ctx)
}

// gpuActive records a heartbeat's GPU activity (hosts.Config.GPUActive).
func (s *Server) gpuActive(ctx context.Context, nodeID string, active map[string]time.Time) error {
	_, err := idle.RecordGPUActivity(ctx, s.pool, nodeID, active, s.now())
	return err
}
