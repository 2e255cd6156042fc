package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Cancel asks the job's node to end it (job.stop: SIGTERM, SIGKILL after
// Config.StopGrace); the job becomes cancelled when hostd reports it
// ended. A queued job is cancelled at once and its allocation given back
// (cancelQueued). A job that ended already is a conflict; cancelling twice is
// accepted once (the second is a conflict too: it is cancelling).
func Cancel(ctx context.Context, tx pgx.Tx, actor alloc.Actor, id string, cfg Config, now time.Time) (api.Job, mutate.Effect, error) {
	cfg = cfg.withDefaults()
	j, err := load(ctx, tx, id, true)
	if err != nil {
		return api.Job{}, mutate.Effect{}, err
	}
	if err := authorize(ctx, tx, actor, j, project.AccessWrite); err != nil {
		return api.Job{}, mutate.Effect{}, err
	}
	switch {
	case api.JobFinal(j.State):
		return api.Job{}, mutate.Effect{}, api.Errorf(api.CodeConflict, "job %s is %s already", j.ID, j.State)
	case j.Cancelling:
		return api.Job{}, mutate.Effect{}, api.Errorf(api.CodeConflict, "job %s is being cancelled already", j.ID)
	}
	if j.State == api.JobQueued {
		return cancelQueued(ctx, tx, actor, j, now)
	}
	if _, err := tasks.Enqueue(ctx, tx, tasks.Task{NodeID: j.NodeID, Type: api.TaskJobStop,
		Params: hostproto.JobStopParams{JobID: j.ID, Grace: cfg.StopGrace}}, now); err != nil {
		return api.Job{}, mutate.Effect{}, err
	}
	if _, err := tx.Exec(ctx, `UPDATE jobs SET cancel_requested = true, updated_at = $2 WHERE id = $1`, j.ID, now); err != nil {
		return api.Job{}, mutate.Effect{}, fmt.Errorf("cancel job %s: %w", j.ID, err)
	}
	j.Cancelling = true
	eff, err := effect(ctx, tx, "job.cancel", j.Job, map[string]any{"by": actor.UserID})
	return j.Job, eff, err
}
