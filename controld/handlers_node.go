package controld

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
)

// nodeEndpoints are the operators' view of GPU hosts (controld/node).
func (s *Server) nodeEndpoints() []endpointDef {
	return []endpointDef{
		s.query(api.EndpointNodeList, operatorOnly, s.nodeList),
		s.query(api.EndpointNodeGet, operatorOnly, s.nodeGet),
		s.query(api.EndpointNodeLogs, operatorOnly, s.nodeLogs),
		s.mutation(api.EndpointSlotsApprove, operatorOnly, s.slotsApprove),
		s.mutation(api.EndpointNodeDrain, operatorOnly, s.nodeDrain),
		s.secretMutation(api.EndpointNodeEnroll, operatorOnly, s.nodeEnroll),
		// Slot quarantine (handlers_health.go).
		s.mutation(api.EndpointNodeQuarantine, operatorOnly, s.nodeQuarantine),
		s.mutation(api.EndpointNodeClear, operatorOnly, s.nodeClear),
	}
}

func (s *Server) nodeList(ctx context.Context, _ *call) (any, error) {
	ns, err := node.List(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	if ns == nil {
		ns = []api.Node{}
	}
	return api.NodeListResponse{Nodes: ns}, nil
}

func (s *Server) nodeGet(ctx context.Context, c *call) (any, error) {
	var req api.NodeRef
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return node.Get(ctx, s.pool, req.Node)
}

func (s *Server) slotsApprove(_ context.Context, c *call) (mutate.Func, error) {
	var req api.SlotsApproveRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
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
		return d, mutate.Effect{
			Audit: audit.Entry{Action: "node.slots_approve", TargetType: "node", TargetID: d.Node.ID,
				Detail: map[string]any{"approved": n, "slots": req.Slots}},
			Events: []outbox.Event{{Kind: api.EventNode, Subject: d.Node.ID, Payload: d.Node}},
		}, nil
	}, nil
}

func (s *Server) nodeDrain(_ context.Context, c *call) (mutate.Func, error) {
	var req api.NodeRef
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		d, err := node.Get(ctx, tx, req.Node)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if err := node.Drain(ctx, tx, d.Node.ID, s.now()); err != nil {
			return nil, mutate.Effect{}, err
		}
		d.Node.State = api.NodeDraining
		return d.Node, mutate.Effect{
			Audit:  audit.Entry{Action: "node.drain", TargetType: "node", TargetID: d.Node.ID},
			Events: []outbox.Event{{Kind: api.EventNode, Subject: d.Node.ID, Payload: d.Node}},
		}, nil
	}, nil
}

func (s *Server) nodeEnroll(_ context.Context, c *call) (mutate.Func, error) {
	var req api.EnrollTokenRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		return node.CreateEnrollToken(ctx, tx, req, c.principal.UserID, s.now())
	}, nil
}
