package alloc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// HostActor is the actor id recorded for changes driven by hostd results.
const HostActor = "system:hostd"

// ProvisionDone applies the outcome of an allocation's provisioning task:
// provisioning → active on success; on failure the allocation fails and a
// cleanup task is queued, whose success frees the slots. An allocation
// that is already releasing keeps releasing: its release task, queued
// behind this one, cleans up either way. It returns the events to
// enqueue, and whether slots were freed.
func ProvisionDone(ctx context.Context, tx pgx.Tx, allocationID, status, reason string, now time.Time) ([]outbox.Event, error) {
	a, err := lockAndLoad(ctx, tx, allocationID)
	if err != nil {
		return nil, err
	}
	if a.State != api.AllocProvisioning {
		return nil, nil
	}
	from := a.State
	if status == hostproto.TaskSucceeded {
		why := "provisioned"
		if reason != "" { // what the driver check passed (drivercheck.go)
			why = reason
		}
		err = transition(ctx, tx, &a, api.AllocActive, why, HostActor, now)
	} else {
		if reason == "" {
			reason = "provisioning " + status
		}
		if err = transition(ctx, tx, &a, api.AllocFailed, reason, HostActor, now); err == nil {
			err = enqueueCleanup(ctx, tx, a, now)
		}
	}
	if err != nil {
		return nil, err
	}
	ev, err := stateEvent(ctx, tx, a, from)
	if err != nil {
		return nil, err
	}
	return []outbox.Event{ev}, nil
}

// ReleaseDone applies the outcome of a release or cleanup task. Success
// frees the slots (and releases a releasing allocation); failure leaves the
// slots held and a releasing allocation release_failed, for an operator.
// It reports whether slots were freed so the caller can retry the queue.
func ReleaseDone(ctx context.Context, tx pgx.Tx, allocationID, status, reason string, now time.Time) ([]outbox.Event, bool, error) {
	a, err := lockAndLoad(ctx, tx, allocationID)
	if err != nil {
		return nil, false, err
	}
	from := a.State
	freed := false
	if status == hostproto.TaskSucceeded {
		if _, err := node.FreeSlots(ctx, tx, a.ID); err != nil {
			return nil, false, err
		}
		freed = true
		if a.State == api.AllocReleasing {
			// A released allocation keeps saying why it was released (its
			// releasing reason: idle, max_duration, a depleted balance,
			// who released it), not just that it was.
			why := a.Reason
			if why == "" {
				why = "released"
			}
			if err := transition(ctx, tx, &a, api.AllocReleased, why, HostActor, now); err != nil {
				return nil, false, err
			}
		}
	} else if a.State == api.AllocReleasing {
		if reason == "" {
			reason = "release " + status
		}
		if err := transition(ctx, tx, &a, api.AllocReleaseFailed, reason, HostActor, now); err != nil {
			return nil, false, err
		}
	}
	if a.State == from {
		return nil, freed, nil
	}
	a.Slots = []api.Slot{}
	ev, err := stateEvent(ctx, tx, a, from)
	if err != nil {
		return nil, false, err
	}
	return []outbox.Event{ev}, freed, nil
}

// enqueueCleanup queues the release task that undoes whatever a failed
// provisioning left on the node.
func enqueueCleanup(ctx context.Context, tx pgx.Tx, a api.Allocation, now time.Time) error {
	return enqueueRelease(ctx, tx, a, true, now)
}

// ProgressEvents are the events telling an allocation's project members
// of phases its host reported, in the order given, for a task of type
// taskType.
func ProgressEvents(ctx context.Context, q store.Querier, allocationID, taskType string, phases []hostproto.TaskProgress) ([]outbox.Event, error) {
	// FOR SHARE orders these events with the allocation's own changes
	// (a release requested meanwhile, say): a change either committed
	// before, or waits for this transaction and takes later outbox ids, so
	// the relay publishes an allocation's events in the order they happened.
	var projectID string
	if err := q.QueryRow(ctx, `SELECT project_id FROM allocations WHERE id = $1 FOR SHARE`, allocationID).Scan(&projectID); err != nil {
		return nil, fmt.Errorf("progress event: %w", err)
	}
	users, err := project.MemberIDs(ctx, q, projectID)
	if err != nil {
		return nil, err
	}
	out := make([]outbox.Event, 0, len(phases))
	for _, p := range phases {
		out = append(out, outbox.Event{Kind: api.EventAllocProgress, Subject: allocationID, ProjectID: projectID, Users: users,
			Payload: api.AllocProgress{AllocationID: allocationID, TaskID: p.TaskID, Task: taskType, PhaseSeq: p.PhaseSeq,
				Phase: p.Phase, Status: p.Status, ElapsedMS: p.ElapsedMS, Message: p.Message, At: p.At}})
	}
	return out, nil
}
