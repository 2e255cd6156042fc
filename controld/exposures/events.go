package exposures

import (
	"context"
	"time"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Event is an exposure's expose.changed event, told to its project's
// members.
func Event(ctx context.Context, q store.Querier, e api.Exposure) (outbox.Event, error) {
	users, err := project.MemberIDs(ctx, q, e.ProjectID)
	if err != nil {
		return outbox.Event{}, err
	}
	return outbox.Event{Kind: api.EventExposure, Subject: e.ID, ProjectID: e.ProjectID, Users: users, Payload: e}, nil
}

// Released ends the exposures of an allocation whose release is done and
// returns their events: the allocation's settler calls it in the
// transaction that records the release (controld/alloc/settle.go). The
// front refuses them before this runs: gate.authorize_http admits only
// active allocations.
func Released(ctx context.Context, q store.Querier, allocationID string, now time.Time) ([]outbox.Event, error) {
	ended, err := EndForAllocation(ctx, q, allocationID, now)
	if err != nil {
		return nil, err
	}
	var events []outbox.Event
	for _, e := range ended {
		ev, err := Event(ctx, q, e)
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	return events, nil
}
