package workloads

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Settlers apply what hostd reports of workloads: workload.start and
// workload.status move the workload their task follows (settleReport);
// workload.stop's report ends the workload it names.
func Settlers(cfg Config) tasks.Settlers {
	cfg = cfg.withDefaults()
	report := func(ctx context.Context, tx pgx.Tx, o tasks.Outcome) (tasks.Effect, error) {
		return settleReport(ctx, tx, o, cfg)
	}
	return tasks.Settlers{
		api.TaskWorkloadStart:  report,
		api.TaskWorkloadStatus: report,
		api.TaskWorkloadStop:   settleStop,
	}
}

// firstWait is the wait of the first workload.status after the start.
const firstWait = 2 * time.Second

// linesMax bounds the last lines kept of a workload.
const linesMax = 16 << 10

// settleReport applies a workload.start or workload.status outcome to
// the workload that task follows (a task no workload follows any more
// changes nothing):
//
//   - the task failed: failed with the node's reason (stopped when a stop
//     was asked for);
//   - the container runs: running, and a workload.status follows it;
//   - it exited: stopped (exit 0, or a stop was asked for) or failed with
//     its exit code and last lines; a container the node no longer has
//     is failed too, unless it was stopped.
func settleReport(ctx context.Context, tx pgx.Tx, o tasks.Outcome, cfg Config) (tasks.Effect, error) {
	w, err := scan(tx.QueryRow(ctx, columns+` WHERE task_id = $1 FOR UPDATE`, o.TaskID))
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && api.WorkloadFinal(w.State)) {
		return tasks.Effect{}, stopStray(ctx, tx, o, cfg)
	}
	if err != nil {
		return tasks.Effect{}, fmt.Errorf("workload of task %s: %w", o.TaskID, err)
	}
	var rep hostproto.WorkloadReport
	released, err := allocationGone(ctx, tx, w.AllocationID)
	if err != nil {
		return tasks.Effect{}, err
	}
	switch {
	case released && (o.Result.Status != hostproto.TaskSucceeded || json.Unmarshal(o.Result.Result, &rep) != nil ||
		rep.State == api.ContainerMissing || rep.State == api.ContainerExited):
		// Its release removed the container (and the user) on the node,
		// or stopped it first (a slice's guest: slice.vm_release) and a
		// status saw it exited in between.
		w.Stopping = true
		return end(ctx, tx, w, nil, "its allocation was released", o.Now)
	case o.Result.Status != hostproto.TaskSucceeded:
		what := "follow"
		if o.Type == api.TaskWorkloadStart {
			what = "start"
		}
		return end(ctx, tx, w, nil, "the node could not "+what+" the workload: "+o.Reason(), o.Now)
	case json.Unmarshal(o.Result.Result, &rep) != nil || rep.WorkloadID != w.ID:
		return end(ctx, tx, w, nil, "hostd's report of the workload is unreadable", o.Now)
	}
	if o.Type == api.TaskWorkloadStart {
		w.Pulled = rep.Pulled
	}
	switch rep.State {
	case api.ContainerRunning, api.ContainerCreated:
		return running(ctx, tx, w, rep, cfg, o.Now)
	case api.ContainerExited:
		return end(ctx, tx, w, &rep, "", o.Now)
	default:
		return end(ctx, tx, w, &rep, "its container is gone from the node", o.Now)
	}
}

// strayActor is who the audit names for a stop controld sends by itself.
const strayActor = "system:workloads"

// stopStray stops a container that runs for a workload already final
// (docs/apps.md, "Prices"): a start report that no workload follows any
// more — a stop that found no container (the start still making it, or
// hostd restarted and forgot the stop) ended the workload, then the
// container was made. Ending the workload again would not re-meter it, so
// the container would run unmetered until its allocation's release: a
// workload.stop with Remove is queued for it, audited as the system's. It
// is bounded: a final workload is followed by no status task, so each
// report of a start or status task in flight queues at most one stop, and
// a stop of a container gone is a no-op on the node. The workload's row
// is not changed.
func stopStray(ctx context.Context, tx pgx.Tx, o tasks.Outcome, cfg Config) error {
	var rep hostproto.WorkloadReport
	if o.Result.Status != hostproto.TaskSucceeded || json.Unmarshal(o.Result.Result, &rep) != nil || rep.WorkloadID == "" ||
		(rep.State != api.ContainerRunning && rep.State != api.ContainerCreated) {
		return nil
	}
	w, err := load(ctx, tx, rep.WorkloadID, true)
	if api.CodeOf(err) == api.CodeNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	if !api.WorkloadFinal(w.State) || w.NodeID != o.NodeID {
		return nil // followed by its own task, or another node's
	}
	// A released allocation's user, and its containers, are gone with it.
	if gone, err := allocationGone(ctx, tx, w.AllocationID); err != nil || gone {
		return err
	}
	if _, err := tasks.Enqueue(ctx, tx, tasks.Task{NodeID: w.NodeID, Type: api.TaskWorkloadStop,
		Params: hostproto.WorkloadStopParams{WorkloadID: w.ID, AllocationID: w.AllocationID, PosixUser: api.PosixUser(w.AllocationID),
			Grace: cfg.StopGrace, Remove: true, RemoveImage: w.AppPricePerHourMinor > 0}}, o.Now); err != nil {
		return err
	}
	return audit.Write(ctx, tx, audit.Meta{At: o.Now, ActorID: strayActor}, audit.Entry{Action: "app.stop", TargetType: "workload",
		TargetID: w.ID, ProjectID: w.ProjectID, Detail: map[string]any{"by": strayActor, "state": w.State, "container": rep.State,
			"reason": "the node runs a container of a workload that ended"}})
}

// settleStop applies workload.stop's report to the workload it names: a
// container that exited, or is gone, ends it as stopped. A failed stop
// changes nothing: the status that follows the workload tells.
func settleStop(ctx context.Context, tx pgx.Tx, o tasks.Outcome) (tasks.Effect, error) {
	var rep hostproto.WorkloadReport
	if o.Result.Status != hostproto.TaskSucceeded || json.Unmarshal(o.Result.Result, &rep) != nil || rep.WorkloadID == "" {
		return tasks.Effect{}, nil
	}
	w, err := load(ctx, tx, rep.WorkloadID, true)
	if api.CodeOf(err) == api.CodeNotFound {
		return tasks.Effect{}, nil
	}
	if err != nil || api.WorkloadFinal(w.State) || rep.State == api.ContainerRunning || w.NodeID != o.NodeID {
		return tasks.Effect{}, err
	}
	return end(ctx, tx, w, &rep, "", o.Now)
}

// running records that the workload runs (or is starting: created, not
// started yet, or its readiness probe has not passed: ready.go) and
// queues the workload.status that follows it.
func running(ctx context.Context, tx pgx.Tx, w row, rep hostproto.WorkloadReport, cfg Config, now time.Time) (tasks.Effect, error) {
	// The first status comes soon (start reports no lines, to be running
	// sooner): the workload's first lines, or its early exit.
	wait := cfg.Wait
	if w.State != api.WorkloadRunning && w.State != api.WorkloadStarting {
		wait = min(wait, firstWait)
	}
	rd := readiness(w, rep, wait, now)
	if rd.late {
		return notReady(ctx, tx, w, rep, cfg, now)
	}
	taskID, err := tasks.Enqueue(ctx, tx, tasks.Task{NodeID: w.NodeID, Type: api.TaskWorkloadStatus,
		Params: hostproto.WorkloadStatusParams{WorkloadID: w.ID, AllocationID: w.AllocationID,
			PosixUser: api.PosixUser(w.AllocationID), Wait: rd.wait, Probe: rd.probe}}, now)
	if err != nil {
		return tasks.Effect{}, err
	}
	from := w.State
	w.State = api.WorkloadRunning
	if rep.State == api.ContainerCreated || !rd.ready {
		w.State = api.WorkloadStarting
	}
	if w.StartedAt == nil {
		w.StartedAt = rep.StartedAt
	}
	if rd.ready && w.spec.Readiness != nil && w.ReadyAt == nil && rep.State == api.ContainerRunning {
		w.ReadyAt = &now
	}
	if _, err := tx.Exec(ctx, `UPDATE workloads SET state = $2, started_at = $3, task_id = $4, pulled = $5,
		last_lines = $6, reported_at = $7, updated_at = $7, ready_by = $8, ready_at = $9 WHERE id = $1`,
		w.ID, w.State, w.StartedAt, taskID, w.Pulled, cleanLines(rep.LastLines), now, rd.readyBy, w.ReadyAt); err != nil {
		return tasks.Effect{}, fmt.Errorf("workload %s running: %w", w.ID, err)
	}
	if err := meterApp(ctx, tx, w, now); err != nil {
		return tasks.Effect{}, err
	}
	if from == w.State {
		return tasks.Effect{}, nil
	}
	return told(ctx, tx, w.Workload)
}

// end records how the workload ended: rep is the node's report (nil when
// there is none), reason why when the report does not say.
func end(ctx context.Context, tx pgx.Tx, w row, rep *hostproto.WorkloadReport, reason string, now time.Time) (tasks.Effect, error) {
	w.EndedAt, w.Reason = &now, reason
	lines := strings.Join(w.LastLines, "\n")
	switch {
	case rep != nil && rep.State == api.ContainerExited:
		code := rep.ExitCode
		w.ExitCode = &code
		if rep.FinishedAt != nil {
			w.EndedAt = rep.FinishedAt
		}
		if w.StartedAt == nil {
			w.StartedAt = rep.StartedAt
		}
		lines = cleanLines(rep.LastLines)
	}
	switch {
	case w.Stopping:
		w.State = api.WorkloadStopped
		if w.Reason == "" {
			w.Reason = "stopped"
		}
	case w.ExitCode != nil && *w.ExitCode == 0:
		w.State = api.WorkloadStopped
		w.Reason = "exited with 0"
	case w.ExitCode != nil:
		w.State = api.WorkloadFailed
		w.Reason = fmt.Sprintf("exited with %d", *w.ExitCode)
		if rep.OOMKilled {
			w.Reason += " (out of memory)"
		}
	default:
		w.State = api.WorkloadFailed
	}
	if _, err := tx.Exec(ctx, `UPDATE workloads SET state = $2, exit_code = $3, reason = $4, started_at = $5, ended_at = $6,
		task_id = '', pulled = $7, last_lines = $8, reported_at = $9, updated_at = $9 WHERE id = $1`,
		w.ID, w.State, w.ExitCode, w.Reason, w.StartedAt, w.EndedAt, w.Pulled, lines, now); err != nil {
		return tasks.Effect{}, fmt.Errorf("workload %s ended: %w", w.ID, err)
	}
	if err := meterApp(ctx, tx, w, now); err != nil {
		return tasks.Effect{}, err
	}
	if err := removePriced(ctx, tx, w, now); err != nil {
		return tasks.Effect{}, err
	}
	return told(ctx, tx, w.Workload)
}

// removePriced queues the removal of an ended priced workload's container
// and of its image from the user's podman storage (docs/apps.md,
// "Prices"): the image of a priced app stays on the node only while a
// metered workload runs it, so the renter cannot run it by hand after.
// A workload removed already (app rm asked for both) or on an allocation
// released (its user and storage are gone) needs none.
func removePriced(ctx context.Context, tx pgx.Tx, w row, now time.Time) error {
	if w.AppPricePerHourMinor <= 0 || w.RemovedAt != nil {
		return nil
	}
	if gone, err := allocationGone(ctx, tx, w.AllocationID); err != nil || gone {
		return err
	}
	_, err := tasks.Enqueue(ctx, tx, tasks.Task{NodeID: w.NodeID, Type: api.TaskWorkloadStop,
		Params: hostproto.WorkloadStopParams{WorkloadID: w.ID, AllocationID: w.AllocationID, PosixUser: api.PosixUser(w.AllocationID),
			Remove: true, RemoveImage: true}}, now)
	return err
}

// systemActor reads allocations for the settlers.
var systemActor = alloc.Actor{UserID: "system:workloads", Role: api.RoleOperator}

// allocationGone reports whether the workload's allocation is no longer
// active (released, releasing or failed): its workloads went with it.
func allocationGone(ctx context.Context, tx pgx.Tx, allocID string) (bool, error) {
	a, err := alloc.Get(ctx, tx, systemActor, allocID)
	if err != nil {
		return false, fmt.Errorf("allocation of workload: %w", err)
	}
	return a.State != api.AllocActive, nil
}

// cleanLines keeps what Postgres text takes of a node's report of lines:
// valid UTF-8 without NUL, at most linesMax bytes (the end).
func cleanLines(lines []string) string {
	s := strings.Join(lines, "\n")
	if len(s) > linesMax {
		s = s[len(s)-linesMax:]
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// told is the event of a workload's new state, to its project's members.
func told(ctx context.Context, tx pgx.Tx, w api.Workload) (tasks.Effect, error) {
	users, err := project.MemberIDs(ctx, tx, w.ProjectID)
	if err != nil {
		return tasks.Effect{}, err
	}
	return tasks.Effect{Events: []outbox.Event{stateEvent(w, users)}}, nil
}
