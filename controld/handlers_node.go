package controld

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
)

// nodeEndpoints are the operators' view of GPU hosts (controld/node).
func (s *Server) nodeEndpoints() []endpointDef {
	return []endpointDef{
		query(s, api.OpNodeList, s.nodeList),
		query(s, api.OpNodeGet, s.nodeGet),
		query(s, api.OpNodeLogs, s.nodeLogs),
		mutation(s, api.OpSlotsApprove, s.slotsApprove),
		mutation(s, api.OpNodeDrain, s.nodeDrain),
		mutation(s, api.OpNodeEnroll, s.nodeEnroll),
		// Slot quarantine (handlers_health.go).
		mutation(s, api.OpNodeQuarantine, s.nodeQuarantine),
		mutation(s, api.OpNodeClear, s.nodeClear),
	}
}

func (s *Server) nodeList(ctx context.Context, _ *call, _ api.Empty) (*api.NodeListResponse, error) {
	ns, err := node.List(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	if ns == nil {
		ns = []api.Node{}
	}
	return &api.NodeListResponse{Nodes: ns}, nil
}

func (s *Server) nodeGet(ctx context.Context, c *call, req api.NodeRef) (*api.NodeDetail, error) {
	d, err := node.Get(ctx, s.pool, req.Node)
	if err != nil {
		return nil, err
	}
	// What operators must know before draining or repairing it.
	d.Volumes, err = volumes.OnNode(ctx, s.pool, d.Node.ID)
	return &d, err
}

func (s *Server) slotsApprove(_ context.Context, c *call, req api.SlotsApproveRequest) (work[api.NodeDetail], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.NodeDetail, mutate.Effect, error) {
		d, err := node.Get(ctx, tx, req.Node)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		n, err := node.ApproveSlots(ctx, tx, d.Node.ID, req.Slots)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if d, err = node.Get(ctx, tx, d.Node.ID); err != nil {
			return nil, mutate.Effect{}, err
		}
		s.kickQueue()
		return &d, mutate.Effect{
			Audit: audit.Entry{Action: "node.slots_approve", TargetType: "node", TargetID: d.Node.ID,
				Detail: map[string]any{"approved": n, "slots": req.Slots}},
			Events: []outbox.Event{{Kind: api.EventNode, Subject: d.Node.ID, Payload: d.Node}},
		}, nil
	}, nil
}

func (s *Server) nodeDrain(_ context.Context, c *call, req api.NodeRef) (work[api.Node], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.Node, mutate.Effect, error) {
		d, err := node.Get(ctx, tx, req.Node)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if err := node.Drain(ctx, tx, d.Node.ID, s.now()); err != nil {
			return nil, mutate.Effect{}, err
		}
		d.Node.State = api.NodeDraining
		return &d.Node, mutate.Effect{
			Audit:  audit.Entry{Action: "node.drain", TargetType: "node", TargetID: d.Node.ID},
			Events: []outbox.Event{{Kind: api.EventNode, Subject: d.Node.ID, Payload: d.Node}},
		}, nil
	}, nil
}

func (s *Server) nodeEnroll(_ context.Context, c *call, req api.EnrollTokenRequest) (work[api.EnrollTokenResponse], error) {
	return func(ctx context.Context, tx pgx.Tx) (*api.EnrollTokenResponse, mutate.Effect, error) {
		return pointerEffect(node.CreateEnrollToken(ctx, tx, req, c.principal.UserID, s.now()))
	}, nil
}
