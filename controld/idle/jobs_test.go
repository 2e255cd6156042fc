package idle_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestIdleReleaseWaitsForARunningJob: an allocation that runs a job shows
// no session activity, yet is not idle: the idle release waits until the
// job ended (docs/jobs.md).
func TestIdleReleaseWaitsForARunningJob(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := e.active(t)
	if _, err := e.pool.Exec(ctx, `INSERT INTO nodes (id, name, shape, gpu_model, state, created_at, updated_at)
		VALUES ('n-1', 'n1', 'gpu_slice', 'H200', 'ready', now(), now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO jobs (id, project_id, user_id, allocation_id, node_id, spec, release, state,
		created_at, updated_at) SELECT 'j-1', project_id, user_id, id, 'n-1', '{"run":"sleep 1d"}', 'keep', 'running', now(), now()
		FROM allocations WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.settings.SetProjectPolicy(ctx, e.pool, e.project, 20*60, t0); err != nil {
		t.Fatal(err)
	}
	if res := e.tick(t, t0.Add(20*time.Minute)); res.Released != 0 || e.state(t, id) != api.AllocActive {
		t.Fatalf("tick with a running job: %+v, state %s; want nothing released", res, e.state(t, id))
	}
	if _, err := e.pool.Exec(ctx, `UPDATE jobs SET state = 'succeeded' WHERE id = 'j-1'`); err != nil {
		t.Fatal(err)
	}
	if res := e.tick(t, t0.Add(21*time.Minute)); res.Released != 1 || e.state(t, id) != api.AllocReleasing {
		t.Fatalf("tick once the job ended: %+v, state %s; want it released", res, e.state(t, id))
	}
}
