package alloc

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// QuarantineNotice is the alloc.notice event telling an allocation's
// project members that one of its GPUs failed and was quarantined, with
// the allocation as it is. The allocation is read FOR SHARE, so the
// notice is ordered with its own changes (see ProgressEvents).
func QuarantineNotice(ctx context.Context, q store.Querier, allocationID, message string) (outbox.Event, api.Allocation, error) {
	var locked string
	err := q.QueryRow(ctx, `SELECT id FROM allocations WHERE id = $1 FOR SHARE`, allocationID).Scan(&locked)
	if errors.Is(err, pgx.ErrNoRows) {
		return outbox.Event{}, api.Allocation{}, notFound(allocationID)
	}
	if err != nil {
		return outbox.Event{}, api.Allocation{}, fmt.Errorf("quarantine notice: %w", err)
	}
	a, err := load(ctx, q, allocationID)
	if err != nil {
		return outbox.Event{}, api.Allocation{}, err
	}
	users, err := project.MemberIDs(ctx, q, a.ProjectID)
	if err != nil {
		return outbox.Event{}, api.Allocation{}, err
	}
	return outbox.Event{Kind: api.EventAllocNotice, Subject: a.ID, ProjectID: a.ProjectID, Users: users,
		Payload: api.AllocNotice{AllocationID: a.ID, Kind: api.NoticeQuarantine, Message: message}}, a, nil
}
