package hosts

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/health"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/corrid"
)

// settle records a task's outcome and applies its effect in one
// transaction.
func (d *Service) settle(ctx context.Context, nodeID string, r api.TaskResult) error {
	now := d.now()
	freed := false
	var done *tasks.Settled
	err := pgx.BeginFunc(ctx, d.cfg.Pool, func(tx pgx.Tx) error {
		settled, ok, err := tasks.Settle(ctx, tx, nodeID, r, now)
		if err != nil || !ok {
			return err // a task already settled: its result was applied
		}
		done = &settled
		ctx := corrid.With(ctx, settled.Corr) // the outcome's events are the task's request's
		typ := settled.Type
		var events []outbox.Event
		reason := r.Error
		if r.Phase != "" && reason != "" {
			reason = r.Phase + ": " + reason
		}
		switch typ {
		case api.TaskVMProvision, api.TaskProvisionUser:
			if r.Status == api.TaskFailed && r.Phase == api.PhaseGPUCheck {
				// The pre-handout check failed: quarantine the GPUs it names.
				var check api.GPUCheckResult
				if json.Unmarshal(r.Result, &check) == nil {
					if events, err = health.CheckFailed(ctx, tx, nodeID, check, now); err != nil {
						return err
					}
				}
			}
			if settled.AllocationID != "" {
				// A GPU that failed while it provisioned fails it.
				status, why, err := health.ProvisionOutcome(ctx, tx, settled.AllocationID, r.Status, reason)
				if err != nil {
					return err
				}
				done, err := alloc.ProvisionDone(ctx, tx, settled.AllocationID, status, why, now)
				if err != nil {
					return err
				}
				events = append(events, done...)
			}
		case api.TaskVMRelease, api.TaskDeprovisionUser:
			if settled.AllocationID != "" {
				events, freed, err = alloc.ReleaseDone(ctx, tx, settled.AllocationID, r.Status, reason, now)
			}
		case api.TaskTopologyDiscover:
			if r.Status == api.TaskSucceeded {
				var topo api.TopologyResult
				if err := json.Unmarshal(r.Result, &topo); err != nil {
					return api.Errorf(api.CodeInvalidArgument, "malformed topology result: %v", err)
				}
				err = node.ApplyDiscovery(ctx, tx, nodeID, topo, d.cfg.AutoApproveSlots, now)
				events = []outbox.Event{{Kind: api.EventNode, Subject: nodeID, Payload: map[string]any{
					"node_id": nodeID, "discovered": len(topo.CandidateSlots), "blockers": topo.Blockers}}}
				freed = d.cfg.AutoApproveSlots
			}
		case api.TaskHealthProbe:
			if r.Status == api.TaskSucceeded {
				err = node.SetHealth(ctx, tx, nodeID, r.Result, "", "", now)
			}
		}
		if err != nil {
			return err
		}
		if err := audit.Write(ctx, tx, audit.Meta{At: now, ActorID: "node:" + nodeID}, audit.Entry{
			Action: "task.settle", TargetType: "task", TargetID: r.TaskID, Detail: map[string]string{
				"type": typ, "status": r.Status, "error": r.Error, "phase": r.Phase}}); err != nil {
			return err
		}
		// The phases no live report published come first: a task's
		// phases, then what its outcome changed.
		if err := enqueueProgress(ctx, tx, settled.Progress, now); err != nil {
			return err
		}
		for _, ev := range events {
			if _, err := outbox.Enqueue(ctx, tx, now, ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && done != nil {
		d.cfg.Log.Info("task result applied", corrid.Key, done.Corr, "task", r.TaskID, "node", nodeID,
			"type", done.Type, "status", r.Status, "phase", r.Phase, "took", done.Took)
		d.cfg.TaskSettled(done.Type, r.Status, done.Took)
	}
	if err == nil {
		d.Wake() // the allocation's next task may be unblocked now
		if freed {
			d.cfg.SlotsFreed()
		}
	}
	return err
}
