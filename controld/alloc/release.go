package alloc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/sched"
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
// locked before it is read. A release the platform made unnecessary (the
// provisioning failed and its cleanup is queued or done; billing released
// it) is accepted and changes nothing: the reply's Note says what
// happened. A user meets conflict only when a person changed it first.
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
	case a.State == api.AllocReleasing || Terminal(a.State):
		if a.Note, err = releasedByPlatform(ctx, tx, a); err == nil && a.Note == "" {
			err = api.Errorf(api.CodeConflict, "allocation %s is already %s", a.ID, a.State)
		}
	case a.State == api.AllocFailed && !req.Force:
		if a.Note, err = cleanupUnderway(ctx, tx, a); err == nil && a.Note == "" {
			err = api.Errorf(api.CodeConflict, "allocation %s is %s and its cleanup failed", a.ID, a.State).
				WithHint("an operator can retry the cleanup with `gpuaas alloc release --force`")
		}
	case a.State == api.AllocReleaseFailed && !req.Force:
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
	if a.Note != "" {
		// The platform got there first: nothing changes, no event; the
		// audit row records the request and what the reply said.
		eff.Audit = audit.Entry{Action: "alloc.release", TargetType: "allocation", TargetID: a.ID, ProjectID: a.ProjectID,
			Detail: map[string]any{"from": from, "to": a.State, "force": req.Force, "reason": reason, "unchanged": a.Note}}
		return a, eff, nil
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
	if _, err := tasks.Enqueue(ctx, tx, sched.ReleaseTask(a, cleanup), now); err != nil {
		return fmt.Errorf("queue release: %w", err)
	}
	return nil
}

// cleanupUnderway is the note of a user's release of an allocation whose
// provisioning failed: its cleanup is queued (or ran, and freed the
// slots), so there is nothing to ask for. "" when the cleanup failed and
// slots are still held: that needs an operator.
func cleanupUnderway(ctx context.Context, tx pgx.Tx, a api.Allocation) (string, error) {
	open, err := tasks.OpenForAllocation(ctx, tx, a.ID)
	if err != nil {
		return "", err
	}
	switch {
	case open > 0:
		return fmt.Sprintf("allocation %s failed (%s); its cleanup is already queued and frees its GPUs when done: nothing more to release", a.ID, a.Reason), nil
	case len(a.Slots) == 0:
		return fmt.Sprintf("allocation %s failed (%s) and was cleaned up: nothing left to release", a.ID, a.Reason), nil
	}
	return "", nil
}

// releasedByPlatform is the note of a release of an allocation the
// platform itself released (billing, when the project's balance ran out):
// the user's wish is already under way. "" when a person released it.
func releasedByPlatform(ctx context.Context, tx pgx.Tx, a api.Allocation) (string, error) {
	var actor, reason string
	err := tx.QueryRow(ctx, `SELECT actor_id, reason FROM allocation_transitions WHERE allocation_id = $1
		AND (to_state = 'releasing' OR (to_state = 'released' AND from_state = 'requested'))
		ORDER BY id DESC LIMIT 1`, a.ID).Scan(&actor, &reason)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("who released %s: %w", a.ID, err)
	}
	if !strings.HasPrefix(actor, "system:") {
		return "", nil
	}
	return fmt.Sprintf("allocation %s is already %s: the platform released it (%s)", a.ID, a.State, reason), nil
}
