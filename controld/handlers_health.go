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

// nodeQuarantine keeps one slot of a node out of placement (operators).
func (s *Server) nodeQuarantine(_ context.Context, c *call, req api.NodeQuarantineRequest) (work[api.NodeDetail], error) {
	sel := node.SlotSelector{Index: req.Slot, GPU: req.GPU}
	if err := node.CheckSelector(sel, false); err != nil {
		return nil, err
	}
	if err := node.CheckReason(req.Reason); err != nil {
		return nil, err
	}
	if err := api.CheckText("reason", req.Reason); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.NodeDetail, mutate.Effect, error) {
		d, err := node.Get(ctx, tx, req.Node)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		slot, already, err := node.Quarantine(ctx, tx, d.Node.ID, sel, req.Reason, c.principal.UserID, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if already {
			return nil, mutate.Effect{}, api.Errorf(api.CodeConflict, "slot %d is already quarantined: %s",
				slot.Index, slot.Quarantine.Reason).WithHint("clear it first with `gpuaas node clear`")
		}
		if d, err = node.Get(ctx, tx, d.Node.ID); err != nil {
			return nil, mutate.Effect{}, err
		}
		return &d, mutate.Effect{
			Audit: audit.Entry{Action: "node.quarantine", TargetType: "node", TargetID: d.Node.ID,
				Detail: map[string]any{"slot": slot.Index, "gpu": slot.GPUPCI, "reason": req.Reason}},
			Events: []outbox.Event{{Kind: api.EventNode, Subject: d.Node.ID, Payload: d.Node}},
		}, nil
	}, nil
}

// nodeClear makes quarantined slots of a node placeable again
// (operators).
func (s *Server) nodeClear(_ context.Context, c *call, req api.NodeClearRequest) (work[api.NodeDetail], error) {
	sel := node.SlotSelector{Index: req.Slot, GPU: req.GPU}
	if err := node.CheckSelector(sel, true); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.NodeDetail, mutate.Effect, error) {
		d, err := node.Get(ctx, tx, req.Node)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		cleared, err := node.ClearQuarantine(ctx, tx, d.Node.ID, sel)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if d, err = node.Get(ctx, tx, d.Node.ID); err != nil {
			return nil, mutate.Effect{}, err
		}
		idx := make([]int, len(cleared))
		for i, sl := range cleared {
			idx[i] = sl.Index
		}
		s.kickQueue() // queued requests may fit now
		return &d, mutate.Effect{
			Audit: audit.Entry{Action: "node.clear", TargetType: "node", TargetID: d.Node.ID,
				Detail: map[string]any{"slots": idx}},
			Events: []outbox.Event{{Kind: api.EventNode, Subject: d.Node.ID, Payload: d.Node}},
		}, nil
	}, nil
}
