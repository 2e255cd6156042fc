package node

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Settlers apply the outcomes of the tasks enrollment queues for a node:
// topology discovery (ApplyDiscovery; autoApprove approves the slots it
// finds at once, dev only) and the health probe (SetHealth). A failed one
// changes nothing: it stays in the node's task list.
func Settlers(autoApprove bool) tasks.Settlers {
	return tasks.Settlers{
		api.TaskTopologyDiscover: func(ctx context.Context, tx pgx.Tx, o tasks.Outcome) (tasks.Effect, error) {
			return settleDiscovery(ctx, tx, o, autoApprove)
		},
		api.TaskHealthProbe: settleHealthProbe,
	}
}

func settleDiscovery(ctx context.Context, tx pgx.Tx, o tasks.Outcome, autoApprove bool) (tasks.Effect, error) {
	if o.Result.Status != hostproto.TaskSucceeded {
		return tasks.Effect{}, nil
	}
	var topo api.TopologyResult
	if err := json.Unmarshal(o.Result.Result, &topo); err != nil {
		return tasks.Effect{}, api.Errorf(api.CodeInvalidArgument, "malformed topology result: %v", err)
	}
	if err := ApplyDiscovery(ctx, tx, o.NodeID, topo, autoApprove, o.Now); err != nil {
		return tasks.Effect{}, err
	}
	return tasks.Effect{SlotsFreed: autoApprove, Events: []outbox.Event{{Kind: api.EventNode, Subject: o.NodeID,
		Payload: map[string]any{"node_id": o.NodeID, "discovered": len(topo.CandidateSlots), "blockers": topo.Blockers}}}}, nil
}

// settleHealthProbe stores a probe's result on its node, in the round
// trip that commits the outcome.
func settleHealthProbe(_ context.Context, _ pgx.Tx, o tasks.Outcome) (tasks.Effect, error) {
	if o.Result.Status != hostproto.TaskSucceeded {
		return tasks.Effect{}, nil
	}
	return tasks.Effect{Final: func(b *pgx.Batch) { QueueSetHealth(b, o.NodeID, o.Result.Result, o.Now) }}, nil
}
