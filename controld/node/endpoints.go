package node

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// VolumesOn lists the volumes on a node (volumes.OnNode; volumes imports
// node, so it is handed in).
type VolumesOn func(ctx context.Context, q store.Querier, nodeID string) ([]api.Volume, error)

// Deps are what the operators' node endpoints need of the server.
type Deps struct {
	// DB serves the reads outside a mutation's transaction.
	DB store.Querier
	// NATS reaches the nodes' hostd (node logs, over hostproto.MsgLogs).
	NATS    *nats.Conn
	Volumes VolumesOn
	// Kick wakes the scheduler's queue when slots become placeable.
	Kick func()
	Now  func() time.Time
}

// Endpoints are the operators' view of GPU hosts: list, detail, logs,
// approving slots, draining, enrollment tokens and slot quarantine
// (docs/decisions/0069-domain-endpoints.md).
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Query(api.OpNodeList, h.list),
		endpoint.Query(api.OpNodeGet, h.get),
		endpoint.Query(api.OpNodeLogs, h.logs),
		endpoint.Mutation(api.OpSlotsApprove, h.slotsApprove),
		endpoint.Mutation(api.OpNodeDrain, h.drain),
		endpoint.Mutation(api.OpNodeEnroll, h.enroll),
		endpoint.Mutation(api.OpNodeQuarantine, h.quarantine),
		endpoint.Mutation(api.OpNodeClear, h.clear),
	}
}

type handlers struct{ Deps }

func (h handlers) list(ctx context.Context, _ *endpoint.Request, _ api.Empty) (*api.NodeListResponse, error) {
	ns, err := List(ctx, h.DB)
	if err != nil {
		return nil, err
	}
	if ns == nil {
		ns = []api.Node{}
	}
	return &api.NodeListResponse{Nodes: ns}, nil
}

func (h handlers) get(ctx context.Context, _ *endpoint.Request, req api.NodeRef) (*api.NodeDetail, error) {
	d, err := Get(ctx, h.DB, req.Node)
	if err != nil {
		return nil, err
	}
	// What operators must know before draining or repairing it.
	d.Volumes, err = h.Volumes(ctx, h.DB, d.Node.ID)
	return &d, err
}

func (h handlers) slotsApprove(_ context.Context, _ *endpoint.Request, req api.SlotsApproveRequest) (endpoint.Work[api.NodeDetail], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.NodeDetail, mutate.Effect, error) {
		d, err := Get(ctx, tx, req.Node)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		n, err := ApproveSlots(ctx, tx, d.Node.ID, req.Slots)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if d, err = Get(ctx, tx, d.Node.ID); err != nil {
			return nil, mutate.Effect{}, err
		}
		h.Kick()
		return &d, mutate.Effect{
			Audit: audit.Entry{Action: "node.slots_approve", TargetType: "node", TargetID: d.Node.ID,
				Detail: map[string]any{"approved": n, "slots": req.Slots}},
			Events: []outbox.Event{{Kind: api.EventNode, Subject: d.Node.ID, Payload: d.Node}},
		}, nil
	}, nil
}

func (h handlers) drain(_ context.Context, _ *endpoint.Request, req api.NodeRef) (endpoint.Work[api.Node], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.Node, mutate.Effect, error) {
		d, err := Get(ctx, tx, req.Node)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if err := Drain(ctx, tx, d.Node.ID, h.Now()); err != nil {
			return nil, mutate.Effect{}, err
		}
		d.Node.State = api.NodeDraining
		return &d.Node, mutate.Effect{
			Audit:  audit.Entry{Action: "node.drain", TargetType: "node", TargetID: d.Node.ID},
			Events: []outbox.Event{{Kind: api.EventNode, Subject: d.Node.ID, Payload: d.Node}},
		}, nil
	}, nil
}

func (h handlers) enroll(_ context.Context, r *endpoint.Request, req api.EnrollTokenRequest) (endpoint.Work[api.EnrollTokenResponse], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.EnrollTokenResponse, mutate.Effect, error) {
		return endpoint.PointerEffect(CreateEnrollToken(ctx, tx, req, r.Principal.UserID, h.Now()))
	}, nil
}
