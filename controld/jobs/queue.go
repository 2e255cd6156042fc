package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/secrets"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/jobspec"
)

// A queued job (docs/jobs.md "Waiting for capacity",
// docs/decisions/0034-queued-jobs-start-themselves.md) is created on an
// allocation that is not active yet and has no node until it starts.
// Advance moves it on whenever its allocation changed state: active →
// started (job.start, as job.create does); failed or released → ended
// with the reason, never started. Every change of an allocation's state
// is an alloc.state event in the outbox, committed with the change, and
// RunQueue (queuerun.go) calls Advance for each one; Advance reads the
// allocation as it is now, so an event seen twice, late or out of order
// changes nothing more than once.

// placeInLine sets the place in line of the queued jobs among list: their
// allocations' (alloc.QueuePositions).
func placeInLine(ctx context.Context, q store.Querier, list []api.Job) error {
	var ids []string
	for _, j := range list {
		if j.State == api.JobQueued {
			ids = append(ids, j.AllocationID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	pos, err := alloc.QueuePositions(ctx, q, ids)
	if err != nil {
		return err
	}
	for i := range list {
		if list[i].State == api.JobQueued {
			list[i].QueuePosition = pos[list[i].AllocationID]
		}
	}
	return nil
}

// createQueued creates a job queued on an allocation that is not active
// yet. Its secrets must exist now (a missing one is refused, as for a job
// that starts at once); they are sealed to the node when it starts.
func createQueued(ctx context.Context, tx pgx.Tx, actor alloc.Actor, req api.JobCreateRequest, p api.Project,
	a api.Allocation, raw []byte, cfg Config, now time.Time) (api.Job, mutate.Effect, error) {
	if len(req.Secrets) > 0 {
		if _, err := secrets.Resolve(ctx, tx, cfg.Secrets, p, req.Secrets); err != nil {
			return api.Job{}, mutate.Effect{}, err
		}
	}
	return insert(ctx, tx, actor, req, a, raw, api.JobQueued, "", ids.New(IDPrefix), now)
}

// Advance moves the queued job of an allocation on as the allocation now
// is, in tx, and returns the events to enqueue (with the audit rows it
// wrote): nothing while the allocation waits or provisions, or when no
// job is queued on it.
func Advance(ctx context.Context, tx pgx.Tx, allocID string, cfg Config, now time.Time) ([]outbox.Event, error) {
	cfg = cfg.withDefaults()
	j, err := scan(tx.QueryRow(ctx, jobColumns+` WHERE allocation_id = $1 AND state = 'queued' FOR UPDATE`, allocID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("queued job of %s: %w", allocID, err)
	}
	h, err := alloc.HoldState(ctx, tx, allocID)
	if err != nil {
		return nil, err
	}
	state, node, reason := h.State, h.NodeID, h.Reason
	switch state {
	case api.AllocRequested, api.AllocProvisioning:
		return nil, nil
	case api.AllocActive:
		return startQueued(ctx, tx, j, node, cfg, now)
	case api.AllocFailed:
		return endQueued(ctx, tx, j, api.JobFailed, fmt.Sprintf("allocation %s failed before the job started: %s", allocID, reason), now)
	default: // releasing, released, release_failed: given up
		return endQueued(ctx, tx, j, api.JobCancelled, fmt.Sprintf("allocation %s was released before the job started: %s", allocID, reason), now)
	}
}

// startQueued starts a queued job on its allocation, now active on node:
// its secrets sealed to that node, a job.start task, the job starting.
// A job that cannot be started (its image revoked or retired, a secret
// removed meanwhile) fails with
// the reason, and its allocation is released as its policy says.
func startQueued(ctx context.Context, tx pgx.Tx, j row, node string, cfg Config, now time.Time) ([]outbox.Event, error) {
	p, err := project.Resolve(ctx, tx, j.ProjectID)
	if err != nil {
		return nil, err
	}
	if err := recheckImage(ctx, tx, j); err != nil { // image.go
		if api.CodeOf(err) == api.CodeInternal {
			return nil, err
		}
		return failQueued(ctx, tx, j, err, now)
	}
	params := startParams(j.ID, j.AllocationID, j.spec, cfg)
	if params.SealedEnv, err = sealSecrets(ctx, tx, cfg.Secrets, p, node, j.spec.Secrets); err != nil {
		if api.CodeOf(err) == api.CodeInternal {
			return nil, err
		}
		return failQueued(ctx, tx, j, err, now)
	}
	if params.GPUs, err = imageGPUs(ctx, tx, j.spec, j.AllocationID); err != nil {
		return nil, err
	}
	taskID, err := tasks.Enqueue(ctx, tx, tasks.Task{NodeID: node, Type: api.TaskJobStart, Params: params}, now)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `UPDATE jobs SET state = 'starting', node_id = $2, task_id = $3, updated_at = $4
		WHERE id = $1`, j.ID, node, taskID, now); err != nil {
		return nil, fmt.Errorf("start queued job %s: %w", j.ID, err)
	}
	j.State, j.NodeID, j.QueuePosition = api.JobStarting, node, 0
	return systemChange(ctx, tx, "job.start_queued", j.Job, now)
}

// failQueued fails a queued job that cannot be started, saying why
// (refused), and releases its allocation as its policy says.
func failQueued(ctx context.Context, tx pgx.Tx, j row, refused error, now time.Time) ([]outbox.Event, error) {
	events, err := endQueued(ctx, tx, j, api.JobFailed, "the job could not be started: "+refused.Error(), now)
	if err != nil || !releases(j.Release, api.JobFailed) {
		return events, err
	}
	released, err := releaseAllocation(ctx, tx, j.AllocationID, api.JobReleaseReason, now)
	return append(events, released...), err
}

// endQueued ends a job that never started (state failed or cancelled,
// with the reason): no exit code, no node task.
func endQueued(ctx context.Context, tx pgx.Tx, j row, state, reason string, now time.Time) ([]outbox.Event, error) {
	if _, err := tx.Exec(ctx, `UPDATE jobs SET state = $2, reason = $3, ended_at = $4, updated_at = $4 WHERE id = $1`,
		j.ID, state, reason, now); err != nil {
		return nil, fmt.Errorf("end queued job %s: %w", j.ID, err)
	}
	j.State, j.Reason, j.EndedAt, j.QueuePosition = state, reason, &now, 0
	return systemChange(ctx, tx, "job.end_queued", j.Job, now)
}

// systemChange audits a change controld made to a job by itself and
// returns its event.
func systemChange(ctx context.Context, tx pgx.Tx, action string, j api.Job, now time.Time) ([]outbox.Event, error) {
	eff, err := effect(ctx, tx, action, j, map[string]any{"reason": j.Reason})
	if err != nil {
		return nil, err
	}
	if err := audit.Write(ctx, tx, audit.Meta{At: now, ActorID: SystemActor}, eff.Audit); err != nil {
		return nil, err
	}
	return eff.Events, nil
}

// releases reports whether a job's release policy gives its allocation
// back once the job is in state.
func releases(policy, state string) bool {
	return policy == jobspec.ReleaseOnExit || (policy == jobspec.ReleaseOnSuccess && state == api.JobSucceeded)
}

// cancelQueued ends a queued job on job.cancel: cancelled at once, and
// its allocation (still waiting for capacity or provisioning, never
// charged while it waits) released unless its policy keeps it.
func cancelQueued(ctx context.Context, tx pgx.Tx, actor alloc.Actor, j row, now time.Time) (api.Job, mutate.Effect, error) {
	reason := "cancelled before it started by " + actor.UserID
	if _, err := tx.Exec(ctx, `UPDATE jobs SET state = 'cancelled', cancel_requested = true, reason = $2, ended_at = $3,
		updated_at = $3 WHERE id = $1`, j.ID, reason, now); err != nil {
		return api.Job{}, mutate.Effect{}, fmt.Errorf("cancel queued job %s: %w", j.ID, err)
	}
	j.State, j.Reason, j.EndedAt, j.QueuePosition = api.JobCancelled, reason, &now, 0
	eff, err := effect(ctx, tx, "job.cancel", j.Job, map[string]any{"by": actor.UserID, "queued": true})
	if err != nil || !releases(j.Release, api.JobCancelled) {
		return j.Job, eff, err
	}
	released, err := releaseAllocation(ctx, tx, j.AllocationID, "job cancelled before it started", now)
	eff.Events = append(eff.Events, released...)
	return j.Job, eff, err
}

// queuedAllocations are the allocations with a job queued on them.
func queuedAllocations(ctx context.Context, q store.Querier) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT allocation_id FROM jobs WHERE state = 'queued' ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("queued jobs: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// allocOfEvent is the allocation an alloc.state event is about.
func allocOfEvent(data []byte) (string, error) {
	var ev api.Event
	if err := json.Unmarshal(data, &ev); err != nil {
		return "", fmt.Errorf("alloc.state event: %w", err)
	}
	return ev.Subject, nil
}
