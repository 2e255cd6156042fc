package hosts

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/store"
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
	conn, err := d.cfg.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// Released idle once committed or rolled back (a COMMIT sent in the
	// final round trip leaves the connection idle as well).
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	s := settling{d: d, nodeID: nodeID, r: r, now: d.now()}
	committed, err := s.run(ctx, tx)
	if err != nil {
		_ = tx.Rollback(ctx) // the error says what went wrong; nothing committed
		return err
	}
	if !committed {
		if err := tx.Commit(ctx); err != nil {
			return err
		}
	}
	if done := s.done; done != nil {
		if s.unsettled != "" {
			d.cfg.Log.Error("task result recorded, not applied", corrid.Key, done.Corr, "task", r.TaskID,
				"node", nodeID, "type", done.Type, "status", r.Status, "err", s.unsettled)
		}
		d.cfg.Log.Info("task result applied", corrid.Key, done.Corr, "task", r.TaskID, "node", nodeID,
			"type", done.Type, "status", r.Status, "phase", r.Phase, "took", done.Took)
		d.cfg.TaskSettled(done.Type, r.Status, done.Took)
	}
	d.Wake() // the allocation's next task may be unblocked now
	if s.eff.SlotsFreed {
		d.cfg.SlotsFreed()
	}
	return nil
}

// settling is one settle's work in its transaction.
type settling struct {
	d      *Service
	nodeID string
	r      hostproto.TaskResult
	now    time.Time

	done      *tasks.Settled // nil: settled before, nothing applied now
	eff       tasks.Effect
	unsettled string // why nothing applied the outcome ("" when a settler did)
}

// run records and applies the outcome in tx. Its last round trip holds the
// settler's final statements (Effect.Final), the audit row, the outbox
// rows and the COMMIT; committed says that COMMIT ran.
func (s *settling) run(ctx context.Context, tx pgx.Tx) (committed bool, err error) {
	r := s.r
	settled, ok, err := tasks.Settle(ctx, tx, s.nodeID, r, s.now)
	if err != nil || !ok {
		return false, err // a task already settled: its result was applied
	}
	s.done = &settled
	ctx = corrid.With(ctx, settled.Corr) // the outcome's events are the task's request's
	typ := settled.Type
	detail := map[string]string{"type": typ, "status": r.Status, "error": r.Error, "phase": r.Phase}
	if apply, ok := s.d.cfg.Settlers[typ]; ok {
		if s.eff, err = apply(ctx, tx, tasks.Outcome{TaskID: r.TaskID, NodeID: s.nodeID,
			AllocationID: settled.AllocationID, Type: typ, Result: r, Now: s.now}); err != nil {
			return false, err
		}
	} else {
		s.unsettled = fmt.Sprintf("no settler for task type %q: its outcome changed nothing", typ)
		detail["settle_error"] = s.unsettled
	}
	// The phases no live report published come first: a task's phases,
	// then what its outcome changed. Their events are read before the
	// final round trip.
	progress, err := s.d.progressEvents(ctx, tx, settled.Progress)
	if err != nil {
		return false, err
	}
	b := &pgx.Batch{}
	if s.eff.Final != nil {
		s.eff.Final(b)
	}
	if err := audit.QueueWrite(b, audit.Meta{At: s.now, ActorID: "node:" + s.nodeID}, audit.Entry{
		Action: "task.settle", TargetType: "task", TargetID: r.TaskID, Detail: detail}); err != nil {
		return false, err
	}
	for _, ev := range append(progress, s.eff.Events...) {
		if err := outbox.QueueEnqueue(ctx, b, s.now, ev); err != nil {
			return false, err
		}
	}
	committed, err = store.CommitInBatch(ctx, tx, b, "task "+r.TaskID)
	if err != nil && committed {
		// The outcome stands (store.CommitInBatch).
		s.d.cfg.Log.Error("a check failed after a task's outcome committed", "task", r.TaskID, "err", err)
		return true, nil
	}
	return committed, err
}
