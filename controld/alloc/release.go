package alloc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Release starts releasing an allocation. A queued request is simply
// withdrawn (released at once); a placed one goes to releasing with its
// release task queued for the node, and its slots come back when hostd
// reports the release done. Force is for operators: it also retries
// allocations stuck in failed or release_failed. Two releases racing for
// one allocation: exactly one wins, the other gets conflict. A release
// racing the platform's own transitions (provisioning → active or failed)
// waits for them and releases from the state they left: the row is
// locked before it is read.
func Release(ctx context.Context, tx pgx.Tx, actor Actor, req api.AllocReleaseRequest, now time.Time) (api.Allocation, mutate.Effect, error) {
	var eff mutate.Effect
	if req.Force && !actor.operator() {
		return api.Allocation{}, eff, api.Errorf(api.CodeForbidden, "only operators can force a release")
	}
	a, err := lockAndLoad(ctx, tx, req.ID)
	if err != nil {
		return api.Allocation{}, eff, err
	}
	if !actor.operator() {
		if _, err := project.Authorize(ctx, tx, a.ProjectID, actor.UserID, actor.Role, project.AccessWrite); err != nil {
			if api.CodeOf(err) == api.CodeNotFound {
				return api.Allocation{}, eff, notFound(req.ID)
			}
			return api.Allocation{}, eff, err
		}
	}
	from := a.State
	reason := req.Reason
	switch {
	case a.State == api.AllocRequested:
		if reason == "" {
			reason = "withdrawn before placement"
		}
		err = transition(ctx, tx, &a, api.AllocReleased, reason, actor.UserID, now)
	case a.State == api.AllocReleasing:
		err = api.Errorf(api.CodeConflict, "allocation %s is already releasing", a.ID)
	case Terminal(a.State):
		err = api.Errorf(api.CodeConflict, "allocation %s is already %s", a.ID, a.State)
	case (a.State == api.AllocFailed || a.State == api.AllocReleaseFailed) && !req.Force:
		err = api.Errorf(api.CodeConflict, "allocation %s is %s", a.ID, a.State).
			WithHint("an operator can retry the cleanup with `gpuaas alloc release --force`")
	default:
		if reason == "" {
			reason = "released by " + actor.UserID
		}
		if err = transition(ctx, tx, &a, api.AllocReleasing, reason, actor.UserID, now); err == nil {
			err = enqueueRelease(ctx, tx, a, req.Force, now)
		}
	}
	if err != nil {
		return api.Allocation{}, eff, err
	}
	ev, err := stateEvent(ctx, tx, a, from)
	if err != nil {
		return api.Allocation{}, eff, err
	}
	eff.Audit = audit.Entry{Action: "alloc.release", TargetType: "allocation", TargetID: a.ID, ProjectID: a.ProjectID,
		Detail: map[string]any{"from": from, "to": a.State, "force": req.Force, "reason": reason}}
	eff.Events = []outbox.Event{ev}
	return a, eff, nil
}

func enqueueRelease(ctx context.Context, tx pgx.Tx, a api.Allocation, cleanup bool, now time.Time) error {
	if a.NodeID == "" {
		return nil
	}
	task := tasks.Task{NodeID: a.NodeID, AllocationID: a.ID, Type: api.TaskVMRelease,
		Params: api.VMReleaseParams{AllocationID: a.ID, Slots: a.Slots, Cleanup: cleanup}}
	if a.Shape == api.ShapeBaremetal {
		task.Type = api.TaskDeprovisionUser
		task.Params = api.UserDeprovisionParams{AllocationID: a.ID, PosixUser: api.PosixUser(a.ID), Cleanup: cleanup}
	}
	if _, err := tasks.Enqueue(ctx, tx, task, now); err != nil {
		return fmt.Errorf("queue release: %w", err)
	}
	return nil
}
