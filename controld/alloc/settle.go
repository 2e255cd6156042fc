package alloc

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/exposures"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// ProvisionVerdict is controld/faults's say on a provisioning task's
// outcome before alloc applies it (faults.ProvisionVerdict; a func, as
// faults imports alloc): it quarantines the GPUs a failed pre-handout check
// names, and fails a provisioning that succeeded on a GPU that failed
// meanwhile. It returns the status and reason to apply, and its events.
type ProvisionVerdict func(ctx context.Context, tx pgx.Tx, o tasks.Outcome) (status, reason string, events []outbox.Event, err error)

// Settlers apply the outcomes of the tasks alloc enqueues: provisioning
// (ProvisionDone, after verdict; nil takes the node's outcome as it is)
// and release or cleanup (ReleaseDone).
func Settlers(verdict ProvisionVerdict) tasks.Settlers {
	provision := func(ctx context.Context, tx pgx.Tx, o tasks.Outcome) (tasks.Effect, error) {
		return settleProvision(ctx, tx, o, verdict)
	}
	return tasks.Settlers{
		api.TaskVMProvision:     provision,
		api.TaskProvisionUser:   provision,
		api.TaskVMRelease:       settleRelease,
		api.TaskDeprovisionUser: settleRelease,
	}
}

func settleProvision(ctx context.Context, tx pgx.Tx, o tasks.Outcome, verdict ProvisionVerdict) (tasks.Effect, error) {
	status, reason := o.Result.Status, o.Reason()
	var events []outbox.Event
	if verdict != nil {
		var err error
		if status, reason, events, err = verdict(ctx, tx, o); err != nil {
			return tasks.Effect{}, err
		}
	}
	status, reason, err := settleDriverCheck(ctx, tx, o, status, reason)
	if err != nil {
		return tasks.Effect{}, err
	}
	if o.AllocationID != "" {
		done, err := ProvisionDone(ctx, tx, o.AllocationID, status, reason, o.Now)
		if err != nil {
			return tasks.Effect{}, err
		}
		events = append(events, done...)
	}
	return tasks.Effect{Events: events}, nil
}

func settleRelease(ctx context.Context, tx pgx.Tx, o tasks.Outcome) (tasks.Effect, error) {
	if o.AllocationID == "" {
		return tasks.Effect{}, nil
	}
	events, freed, err := ReleaseDone(ctx, tx, o.AllocationID, o.Result.Status, o.Reason(), o.Now)
	if err == nil { // a released allocation's ports are no longer served (docs/expose.md)
		var ended []outbox.Event
		ended, err = exposures.Released(ctx, tx, o.AllocationID, o.Now)
		events = append(events, ended...)
	}
	if err == nil && o.Result.Status == hostproto.TaskSucceeded {
		// The node unmounted them before removing the user: they stay.
		var detached []outbox.Event
		detached, err = volumes.Detach(ctx, tx, o.AllocationID, o.Now)
		events = append(events, detached...)
	}
	return tasks.Effect{Events: events, SlotsFreed: freed}, err
}
