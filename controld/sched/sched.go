// Package sched places allocations on slots: it decides where a request
// goes, over the candidates controld/node offers, and has node reserve
// them. It writes no table itself. Reserving happens in the caller's
// transaction with FOR UPDATE SKIP LOCKED (node.Reserve), so concurrent
// placements never wait on each other and never double-book.
package sched

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ErrNoCapacity means no node can take the request right now.
var ErrNoCapacity = api.ErrNoCapacity

// maxCandidates is the page size of candidates: one placement reads the
// next page only when every candidate of this one is taken or locked by
// concurrent placements (possibly on other controld replicas).
const maxCandidates = 32

// Request is what to place.
type Request struct {
	AllocationID string
	Shape        string
	GPUModel     string
	GPUs         int
	// NodeID, when set, is the only node the request may go to: where
	// the volumes it mounts are (pinned.go).
	NodeID string
}

// Placement is where a request went.
type Placement struct {
	NodeID string
	Slots  []api.Slot
}

// candidatePage returns up to limit places to try, best first, skipping
// the first offset: one of node's candidate lists.
type candidatePage func(ctx context.Context, q store.Querier, r node.Room, limit, offset int) ([]node.Candidate, error)

// Place reserves slots for r inside tx. Slices go to a single NUMA node
// when any node has room there, best-fit (the fullest group that still
// fits) to keep large groups free; otherwise to the best-fitting node
// across its NUMA nodes. Bare metal takes a whole node whose every slot is
// free. It returns an error wrapping ErrNoCapacity when nothing fits.
func Place(ctx context.Context, tx pgx.Tx, r Request) (Placement, error) {
	if r.GPUs <= 0 {
		return Placement{}, api.Errorf(api.CodeInvalidArgument, "gpus must be positive")
	}
	if r.NodeID != "" {
		return placeOn(ctx, tx, r)
	}
	// Each kind of candidate, best first: claimed (a candidate no
	// concurrent placement holds, so they spread over the fleet instead of
	// racing for the same slots), then in pages read past the ones held,
	// then among the counts that lag (node's slot_group_deltas).
	type step struct {
		kind  node.Kind
		pages []candidatePage
	}
	var steps []step
	switch r.Shape {
	case api.ShapeBaremetal:
		steps = []step{{node.WholeNode, []candidatePage{node.WholeNodesFree, node.WholeNodesFreeInDeltas}}}
	case api.ShapeGPUSlice:
		// One NUMA node first; across NUMA nodes only when no group fits.
		steps = []step{
			{node.NUMAGroup, []candidatePage{node.NUMAGroupsWithRoom, node.NUMAGroupsWithRoomInDeltas}},
			{node.SpreadNode, []candidatePage{node.NodesWithRoom, node.NodesWithRoomInDeltas}},
		}
	default:
		return Placement{}, api.Errorf(api.CodeInvalidArgument, "unknown shape %q", r.Shape)
	}
	room := node.Room{Shape: r.Shape, GPUModel: r.GPUModel, GPUs: r.GPUs}
	for _, st := range steps {
		var tried []node.Candidate
		for range maxCandidates {
			slots, c, found, ok, err := node.ReserveClaimed(ctx, tx, r.AllocationID, st.kind, room, tried)
			if err != nil {
				return Placement{}, err
			}
			if ok {
				return Placement{NodeID: c.NodeID, Slots: slots}, nil
			}
			if !found {
				break
			}
			tried = append(tried, c)
		}
		for _, page := range st.pages {
			for offset := 0; ; offset += maxCandidates {
				candidates, err := page(ctx, tx, room, maxCandidates, offset)
				if err != nil {
					return Placement{}, err
				}
				for _, c := range candidates {
					slots, ok, err := node.Reserve(ctx, tx, r.AllocationID, c, r.GPUs)
					if err != nil {
						return Placement{}, err
					}
					if ok {
						return Placement{NodeID: c.NodeID, Slots: slots}, nil
					}
				}
				if len(candidates) < maxCandidates {
					break
				}
			}
		}
	}
	return Placement{}, api.Errorf(api.CodeNoCapacity, "no capacity for %d × %s (%s) right now", r.GPUs, r.GPUModel, r.Shape).
		WithHint("add --queue to wait in line for capacity, or pick another SKU (`gpuaas catalog list`)")
}

// IsNoCapacity reports whether err is a no-capacity placement failure.
func IsNoCapacity(err error) bool { return errors.Is(err, ErrNoCapacity) }
