package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/logstream"
)

// Retries (docs/jobs.md "Retries", docs/decisions/0045-job-retries.md): a
// job the platform lost — hostd restarted and could not re-attach it,
// or the node stopped answering — is started again on its allocation
// while it has retries left; never after its own exit, a timeout or a
// cancel. The retry is decided in the transaction that settles the lost
// report, which also moves the job to its new task: a report delivered
// again finds no job following its task (settleReport), so one lost
// event makes one attempt, whichever controld replica settles it and
// across restarts.

// retry starts attempt j.Attempt+1 of a lost job: a job.start on its
// allocation's node, queued like any node task (it waits there until
// hostd answers again). It returns why not, instead, when the
// allocation is no longer active (given up, or failed with its node) or
// the job cannot be started again (a secret removed meanwhile); the job
// then ends lost with that said.
func retry(ctx context.Context, tx pgx.Tx, j row, lost string, cfg Config, now time.Time) (tasks.Effect, string, error) {
	h, err := alloc.HoldState(ctx, tx, j.AllocationID)
	if err != nil {
		return tasks.Effect{}, "", err
	}
	if h.State != api.AllocActive || h.NodeID != j.NodeID {
		return tasks.Effect{}, fmt.Sprintf("not retried: allocation %s is %s", j.AllocationID, h.State), nil
	}
	p, err := project.Resolve(ctx, tx, j.ProjectID)
	if err != nil {
		return tasks.Effect{}, "", err
	}
	params := startParams(j.ID, j.AllocationID, j.spec, cfg)
	params.Attempt, params.AttemptReason = j.Attempt+1, lost
	if params.SealedEnv, err = sealSecrets(ctx, tx, cfg.Secrets, p, j.NodeID, j.spec.Secrets); err != nil {
		if api.CodeOf(err) == api.CodeInternal {
			return tasks.Effect{}, "", err
		}
		return tasks.Effect{}, "not retried: the job could not be started again: " + err.Error(), nil
	}
	if params.GPUs, err = imageGPUs(ctx, tx, j.spec, j.AllocationID); err != nil {
		return tasks.Effect{}, "", err
	}
	if cfg.LogNext != nil {
		// The lost attempt publishes nothing more (its hostd is gone, or
		// a hostd that still runs it re-attaches it instead: the
		// supervisor keeps one job per id), so this is where the log
		// goes on.
		if params.LogNext, err = cfg.LogNext(ctx, logstream.Subject(j.NodeID, logstream.KindJob, j.ID)); err != nil {
			return tasks.Effect{}, "", fmt.Errorf("retry job %s: its log: %w", j.ID, err)
		}
	}
	taskID, err := tasks.Enqueue(ctx, tx, tasks.Task{NodeID: j.NodeID, Type: api.TaskJobStart, Params: params}, now)
	if err != nil {
		return tasks.Effect{}, "", err
	}
	reason := fmt.Sprintf("attempt %d lost: %s", j.Attempt, lost)
	if _, err := tx.Exec(ctx, `UPDATE jobs SET state = 'starting', attempt = attempt + 1, phase = '', reason = $2,
		task_id = $3, updated_at = $4 WHERE id = $1`, j.ID, reason, taskID, now); err != nil {
		return tasks.Effect{}, "", fmt.Errorf("retry job %s: %w", j.ID, err)
	}
	j.State, j.Attempt, j.Phase, j.Reason = api.JobStarting, j.Attempt+1, "", reason
	eff, err := effect(ctx, tx, "job.retry", j.Job, map[string]any{"reason": lost, "attempt": j.Attempt, "retries": j.Retries})
	if err != nil {
		return tasks.Effect{}, "", err
	}
	if err := audit.Write(ctx, tx, audit.Meta{At: now, ActorID: SystemActor}, eff.Audit); err != nil {
		return tasks.Effect{}, "", err
	}
	return tasks.Effect{Events: eff.Events}, "", nil
}
