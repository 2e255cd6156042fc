package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Settlers apply what hostd reports of jobs: job.start and job.wait move
// a job on (settleReport); job.stop's outcome changes nothing by itself,
// the job's own report says how it ended.
func Settlers(cfg Config) tasks.Settlers {
	cfg = cfg.withDefaults()
	report := func(ctx context.Context, tx pgx.Tx, o tasks.Outcome) (tasks.Effect, error) {
		return settleReport(ctx, tx, o, cfg)
	}
	return tasks.Settlers{
		api.TaskJobStart: report,
		api.TaskJobWait:  report,
		api.TaskJobStop:  func(context.Context, pgx.Tx, tasks.Outcome) (tasks.Effect, error) { return tasks.Effect{}, nil },
	}
}

// settleReport applies a job.start or job.wait outcome to the job that
// task follows (a task no job follows any more changes nothing):
//
//   - the task failed, was interrupted (hostd restarted) or expired: the
//     job is lost with the reason (docs/decisions/0015-jobs-on-the-node.md);
//   - hostd does not know the job (it restarted since starting it): lost;
//   - it still runs: running, and a job.wait follows it;
//   - it ended: succeeded, failed or cancelled, with its exit code.
//
// A job that ended releases its allocation as its release policy says.
func settleReport(ctx context.Context, tx pgx.Tx, o tasks.Outcome, cfg Config) (tasks.Effect, error) {
	j, err := scan(tx.QueryRow(ctx, jobColumns+` WHERE task_id = $1 FOR UPDATE`, o.TaskID))
	if errors.Is(err, pgx.ErrNoRows) {
		return tasks.Effect{}, nil
	}
	if err != nil {
		return tasks.Effect{}, fmt.Errorf("job of task %s: %w", o.TaskID, err)
	}
	if api.JobFinal(j.State) {
		return tasks.Effect{}, nil
	}
	var rep hostproto.JobReport
	switch {
	case o.Result.Status != hostproto.TaskSucceeded:
		rep = hostproto.JobReport{Ended: true, Unknown: true, Reason: lostReason(o)}
	case json.Unmarshal(o.Result.Result, &rep) != nil || rep.JobID != j.ID:
		rep = hostproto.JobReport{Ended: true, Unknown: true, Reason: "hostd's report of the job is unreadable"}
	}
	if !rep.Ended {
		return running(ctx, tx, j, rep, cfg, o.Now)
	}
	if rep.Unknown && !j.Cancelling && j.Attempt <= j.Retries {
		if refused := recheckImage(ctx, tx, j); refused != nil { // image.go
			if api.CodeOf(refused) == api.CodeInternal {
				return tasks.Effect{}, refused
			}
			// Failed, not lost: the platform refuses the retry, as
			// job.create would refuse the job now. The code selects
			// failed in ended; with no StartedAt it is not recorded.
			rep = hostproto.JobReport{Ended: true, ExitCode: 255,
				Reason: rep.Reason + "; not retried: " + refused.Error()}
			return ended(ctx, tx, j, rep, o.Now)
		}
		eff, notRetried, err := retry(ctx, tx, j, rep.Reason, cfg, o.Now)
		if err != nil || notRetried == "" {
			return eff, err
		}
		rep.Reason += "; " + notRetried
	} else if rep.Unknown && j.Retries > 0 && !j.Cancelling {
		rep.Reason += fmt.Sprintf("; not retried: attempt %d of %d, its retries (%d) are used up", j.Attempt, j.Retries+1, j.Retries)
	}
	return ended(ctx, tx, j, rep, o.Now)
}

// cleanOutput keeps what Postgres text takes of a node's report of
// output: valid UTF-8 without NUL, at most outputMax bytes (the end).
func cleanOutput(s string) string {
	if len(s) > outputMax {
		s = s[len(s)-outputMax:]
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// outputMax bounds the output kept of a job (hostd sends 16 KiB at most).
const outputMax = 16 << 10

func lostReason(o tasks.Outcome) string {
	if o.Result.Status == hostproto.TaskInterrupted {
		return "hostd stopped while the job ran (" + o.Reason() + "); the job was not re-attached"
	}
	if o.Type == api.TaskJobStart && o.Result.Status == hostproto.TaskFailed {
		return "the node could not start the job: " + o.Reason()
	}
	return "the node could not follow the job: " + o.Reason()
}

// running records that the job runs and queues the job.wait that
// follows it.
func running(ctx context.Context, tx pgx.Tx, j row, rep hostproto.JobReport, cfg Config, now time.Time) (tasks.Effect, error) {
	taskID, err := tasks.Enqueue(ctx, tx, tasks.Task{NodeID: j.NodeID, Type: api.TaskJobWait,
		Params: hostproto.JobWaitParams{JobID: j.ID, Wait: cfg.Wait}}, now)
	if err != nil {
		return tasks.Effect{}, err
	}
	from := j.State
	j.State, j.Phase = api.JobRunning, rep.Phase
	if j.StartedAt == nil {
		j.StartedAt = rep.StartedAt
	}
	if _, err := tx.Exec(ctx, `UPDATE jobs SET state = $2, phase = $3, started_at = $4, task_id = $5, updated_at = $6
		WHERE id = $1`, j.ID, j.State, j.Phase, j.StartedAt, taskID, now); err != nil {
		return tasks.Effect{}, fmt.Errorf("job %s running: %w", j.ID, err)
	}
	if from == j.State {
		return tasks.Effect{}, nil
	}
	return told(ctx, tx, j.Job)
}

// ended records how the job ended and releases its allocation as its
// policy says.
func ended(ctx context.Context, tx pgx.Tx, j row, rep hostproto.JobReport, now time.Time) (tasks.Effect, error) {
	j.EndedAt = rep.EndedAt
	if j.EndedAt == nil {
		j.EndedAt = &now
	}
	if j.StartedAt == nil {
		j.StartedAt = rep.StartedAt
	}
	j.Phase, j.Signal, j.Reason = rep.Phase, rep.Signal, rep.Reason
	switch {
	case rep.Unknown:
		j.State = api.JobLost
	case rep.Cancelled || j.Cancelling:
		j.State = api.JobCancelled
		if j.Reason == "" {
			j.Reason = "cancelled"
		}
	case rep.TimedOut:
		j.State, j.Reason = api.JobFailed, fmt.Sprintf("%s: ran longer than %s", api.JobReasonTimeout, time.Duration(j.spec.Timeout)*time.Second)
	case rep.ExitCode == 0 && rep.Signal == "":
		j.State = api.JobSucceeded
	default:
		j.State = api.JobFailed
		if j.Reason == "" && rep.Signal != "" {
			j.Reason = rep.Phase + ": killed by " + rep.Signal
		} else if j.Reason == "" {
			j.Reason = fmt.Sprintf("%s exited with %d", rep.Phase, rep.ExitCode)
		}
	}
	if !rep.Unknown && rep.StartedAt != nil { // a job stopped before it started has no exit code
		code := rep.ExitCode
		j.ExitCode = &code
	}
	if _, err := tx.Exec(ctx, `UPDATE jobs SET state = $2, phase = $3, exit_code = $4, signal = $5, reason = $6,
		started_at = $7, ended_at = $8, task_id = '', updated_at = $9, output = $10, output_bytes = $11 WHERE id = $1`,
		j.ID, j.State, j.Phase, j.ExitCode, j.Signal, j.Reason, j.StartedAt, j.EndedAt, now,
		cleanOutput(rep.Output), max(rep.OutputBytes, 0)); err != nil {
		return tasks.Effect{}, fmt.Errorf("job %s ended: %w", j.ID, err)
	}
	eff, err := told(ctx, tx, j.Job)
	if err != nil {
		return eff, err
	}
	if !releases(j.Release, j.State) {
		return eff, nil
	}
	events, err := releaseAllocation(ctx, tx, j.AllocationID, api.JobReleaseReason, now)
	eff.Events = append(eff.Events, events...)
	return eff, err
}

// releaseAllocation releases the job's allocation, as the platform, with
// the reason (api.JobReleaseReason when the job ended). One someone
// released meanwhile is left as it is.
func releaseAllocation(ctx context.Context, tx pgx.Tx, allocID, reason string, now time.Time) ([]outbox.Event, error) {
	actor := alloc.Actor{UserID: SystemActor, Role: api.RoleOperator}
	_, eff, err := alloc.Release(ctx, tx, actor, api.AllocReleaseRequest{ID: allocID, Reason: reason}, now)
	if api.CodeOf(err) == api.CodeConflict {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("release allocation %s of its job: %w", allocID, err)
	}
	return eff.Events, nil
}

// told is the event of a job's new state, to its project's members.
func told(ctx context.Context, tx pgx.Tx, j api.Job) (tasks.Effect, error) {
	users, err := project.MemberIDs(ctx, tx, j.ProjectID)
	if err != nil {
		return tasks.Effect{}, err
	}
	return tasks.Effect{Events: []outbox.Event{stateEvent(j, users)}}, nil
}
