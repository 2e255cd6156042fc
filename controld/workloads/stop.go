package workloads

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

// Stop asks the workload's node to stop it (workload.stop: SIGTERM,
// SIGKILL after Config.StopGrace); it becomes stopped when hostd reports
// it ended. A workload that ended already, or is being stopped, is a
// conflict.
func Stop(ctx context.Context, tx pgx.Tx, actor alloc.Actor, id string, cfg Config, now time.Time) (api.Workload, mutate.Effect, error) {
	w, err := loadForChange(ctx, tx, actor, id)
	if err != nil {
		return api.Workload{}, mutate.Effect{}, err
	}
	switch {
	case api.WorkloadFinal(w.State):
		return api.Workload{}, mutate.Effect{}, api.Errorf(api.CodeConflict, "workload %s is %s already", w.ID, w.State).
			WithHint("remove it with `gpuaas app rm " + w.ID + "`")
	case w.Stopping:
		return api.Workload{}, mutate.Effect{}, api.Errorf(api.CodeConflict, "workload %s is being stopped already", w.ID)
	}
	if err := stopTask(ctx, tx, w, cfg, false, now); err != nil {
		return api.Workload{}, mutate.Effect{}, err
	}
	w.Stopping = true
	eff, err := effect(ctx, tx, "app.stop", w.Workload, map[string]any{"by": actor.UserID})
	return w.Workload, eff, err
}

// Rm removes a workload: stops it if it runs, and removes its container
// on the node (workload.stop with remove); its name is free at once.
// Removing a removed workload is a conflict.
func Rm(ctx context.Context, tx pgx.Tx, actor alloc.Actor, id string, cfg Config, now time.Time) (api.Workload, mutate.Effect, error) {
	w, err := loadForChange(ctx, tx, actor, id)
	if err != nil {
		return api.Workload{}, mutate.Effect{}, err
	}
	if w.RemovedAt != nil {
		return api.Workload{}, mutate.Effect{}, api.Errorf(api.CodeConflict, "workload %s is removed already", w.ID)
	}
	if err := stopTask(ctx, tx, w, cfg, true, now); err != nil {
		return api.Workload{}, mutate.Effect{}, err
	}
	if _, err := tx.Exec(ctx, `UPDATE workloads SET removed_at = $2, updated_at = $2 WHERE id = $1`, w.ID, now); err != nil {
		return api.Workload{}, mutate.Effect{}, fmt.Errorf("remove workload %s: %w", w.ID, err)
	}
	w.RemovedAt, w.Stopping = &now, !api.WorkloadFinal(w.State)
	eff, err := effect(ctx, tx, "app.rm", w.Workload, map[string]any{"by": actor.UserID})
	return w.Workload, eff, err
}

func loadForChange(ctx context.Context, tx pgx.Tx, actor alloc.Actor, id string) (row, error) {
	w, err := load(ctx, tx, id, true)
	if err != nil {
		return w, err
	}
	return w, authorize(ctx, tx, actor, w, project.AccessWrite)
}

// stopTask queues workload.stop and records that a stop was asked for.
// The task that follows the workload stays (a start or status report
// still settles; it is stop's report that ends the workload).
func stopTask(ctx context.Context, tx pgx.Tx, w row, cfg Config, remove bool, now time.Time) error {
	cfg = cfg.withDefaults()
	if _, err := tasks.Enqueue(ctx, tx, tasks.Task{NodeID: w.NodeID, Type: api.TaskWorkloadStop,
		Params: hostproto.WorkloadStopParams{WorkloadID: w.ID, AllocationID: w.AllocationID, PosixUser: api.PosixUser(w.AllocationID),
			Grace: cfg.StopGrace, Remove: remove, RemoveImage: remove && w.AppPricePerHourMinor > 0}}, now); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE workloads SET stop_requested = true, updated_at = $2 WHERE id = $1`, w.ID, now); err != nil {
		return fmt.Errorf("stop workload %s: %w", w.ID, err)
	}
	return nil
}
