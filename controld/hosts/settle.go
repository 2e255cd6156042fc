package hosts

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/corrid"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// settle records a task's outcome and applies its effect in one
// transaction: tasks.Settle records it (once), the settler registered
// for its type applies it, and the audit row and outbox events follow.
//
// A type without a settler is a wiring mistake (every type a domain
// enqueues comes with its settler: TestEveryTaskTypeHasASettler). Its
// result is still recorded, as the node reported it, so the node's resends
// and the deadline sweep end; the audit row says nothing applied it
// (settle_error), and it is logged as an error.
func (d *Service) settle(ctx context.Context, nodeID string, r hostproto.TaskResult) error {
	now := d.now()
	var eff tasks.Effect
	var done *tasks.Settled
	unsettled := ""
	err := pgx.BeginFunc(ctx, d.cfg.Pool, func(tx pgx.Tx) error {
		settled, ok, err := tasks.Settle(ctx, tx, nodeID, r, now)
		if err != nil || !ok {
			return err // a task already settled: its result was applied
		}
		done = &settled
		ctx := corrid.With(ctx, settled.Corr) // the outcome's events are the task's request's
		typ := settled.Type
		detail := map[string]string{"type": typ, "status": r.Status, "error": r.Error, "phase": r.Phase}
		if apply, ok := d.cfg.Settlers[typ]; ok {
			eff, err = apply(ctx, tx, tasks.Outcome{TaskID: r.TaskID, NodeID: nodeID,
				AllocationID: settled.AllocationID, Type: typ, Result: r, Now: now})
			if err != nil {
				return err
			}
		} else {
			unsettled = fmt.Sprintf("no settler for task type %q: its outcome changed nothing", typ)
			detail["settle_error"] = unsettled
		}
		if err := audit.Write(ctx, tx, audit.Meta{At: now, ActorID: "node:" + nodeID}, audit.Entry{
			Action: "task.settle", TargetType: "task", TargetID: r.TaskID, Detail: detail}); err != nil {
			return err
		}
		// The phases no live report published come first: a task's
		// phases, then what its outcome changed.
		if err := d.enqueueProgress(ctx, tx, settled.Progress, now); err != nil {
			return err
		}
		for _, ev := range eff.Events {
			if _, err := outbox.Enqueue(ctx, tx, now, ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && done != nil {
		if unsettled != "" {
			d.cfg.Log.Error("task result recorded, not applied", corrid.Key, done.Corr, "task", r.TaskID,
				"node", nodeID, "type", done.Type, "status", r.Status, "err", unsettled)
		}
		d.cfg.Log.Info("task result applied", corrid.Key, done.Corr, "task", r.TaskID, "node", nodeID,
			"type", done.Type, "status", r.Status, "phase", r.Phase, "took", done.Took)
		d.cfg.TaskSettled(done.Type, r.Status, done.Took)
	}
	if err == nil {
		d.Wake() // the allocation's next task may be unblocked now
		if eff.SlotsFreed {
			d.cfg.SlotsFreed()
		}
	}
	return err
}
