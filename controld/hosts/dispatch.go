package hosts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/corrid"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/signing"
)

// redeliverMargin is how long past DeliveryTimeout a task may stay
// dispatched before it is sent again. A live replica has by then recorded
// the node's answer or put the task back in line; one still dispatched was
// claimed by a replica that died (or lost the bus) before it could, and
// would otherwise wait for nobody. Sending it again is safe: hostd dedupes
// task ids, answering a task it already took "duplicate" without running
// it again.
const redeliverMargin = 2 * time.Second

// claimBatch bounds the tasks one dispatch round claims.
const claimBatch = 64

// dispatchLoop delivers due tasks as they are queued (LISTEN tasks.Channel)
// or become due, and fails tasks past their deadline. It outlives Postgres
// restarts: without its LISTEN connection it polls every tick and listens
// again as soon as it can. Deliveries run under hard: a batch claimed
// before ctx ended is delivered and its answers recorded, rather than left
// dispatched until redeliverAfter.
func (d *Service) dispatchLoop(ctx, hard context.Context) error {
	l := &store.Listener{Name: "dispatcher", Pool: d.cfg.Pool, Channel: tasks.Channel, Log: d.cfg.Log}
	defer l.Close(ctx)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	// Deadlines are minutes: they are checked on the ticks, not between a
	// task's notification and its delivery.
	expireDue := true
	for {
		l.Ensure(ctx)
		if expireDue {
			if err := d.expire(ctx); err != nil && ctx.Err() == nil {
				d.cfg.Log.Warn("expire tasks", "err", err)
			}
		}
		// Again only after a full batch: a task queued or unblocked
		// meanwhile has notified (tasks.Channel) or woken (Wake) this loop,
		// and both are kept until the select below, so a partial batch
		// needs no second, empty claim.
		for {
			n, err := d.dispatchOnce(ctx, hard)
			if err != nil && ctx.Err() == nil {
				d.cfg.Log.Warn("dispatch", "err", err)
			}
			if n < claimBatch || err != nil {
				break
			}
		}
		expireDue = false
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			expireDue = true
		case <-l.Notified():
		case <-d.wake:
		}
	}
}

// dispatchOnce claims a batch of due tasks and delivers them concurrently,
// under hard.
func (d *Service) dispatchOnce(ctx, hard context.Context) (int, error) {
	now := d.now()
	batch, err := tasks.Claim(ctx, d.cfg.Pool, now, now.Add(-(d.cfg.DeliveryTimeout + redeliverMargin)), claimBatch)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, c := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := d.deliver(hard, c)
			switch {
			case err == nil || hard.Err() != nil:
			case errors.Is(err, nats.ErrNoResponders):
				// The node is offline (or enrolling): it pulls on connect.
				d.cfg.Log.Debug("node not listening; task stays pending", "task", c.ID, "node", c.NodeID, corrid.Key, c.Corr)
			default:
				d.cfg.Log.Warn("deliver task", "task", c.ID, "node", c.NodeID, corrid.Key, c.Corr, "err", err)
			}
		}()
	}
	wg.Wait()
	return len(batch), nil
}

// envelope signs a task for its node.
func (d *Service) envelope(id, nodeID, typ string, params []byte, corr string) (signing.Envelope, error) {
	now := d.now()
	return signing.Sign(d.cfg.TaskKey, signing.Task{ID: id, NodeID: nodeID, Type: typ, Params: params,
		IssuedAt: now, ExpiresAt: now.Add(d.cfg.EnvelopeTTL), Corr: corr})
}

// deliver sends one task and records hostd's answer. A node that does not
// answer keeps the task pending, retried with backoff; it also pulls its
// tasks itself when it reconnects.
func (d *Service) deliver(ctx context.Context, c tasks.Claimed) error {
	env, err := d.envelope(c.ID, c.NodeID, c.Type, c.Params, c.Corr)
	if err != nil {
		return err
	}
	log := d.cfg.Log.With(corrid.Key, c.Corr, "task", c.ID, "node", c.NodeID)
	level := slog.LevelInfo
	if c.Attempts > 1 {
		level = slog.LevelDebug // an offline node's task is retried every few seconds
	}
	log.Log(ctx, level, "dispatching task", "type", c.Type, "attempt", c.Attempts)
	rctx, cancel := context.WithTimeout(ctx, d.cfg.DeliveryTimeout)
	defer cancel()
	reply, err := d.request(rctx, c, hostproto.Sealed[signing.Task](env))
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		backoff := min(time.Duration(1<<min(c.Attempts, 8))*250*time.Millisecond, time.Minute)
		if errors.Is(err, nats.ErrNoResponders) {
			backoff = min(backoff, 5*time.Second) // the node pulls on reconnect anyway
		}
		log.Debug("task not taken; retrying", "in", backoff, "err", err)
		uerr := tasks.Retry(ctx, d.cfg.Pool, c.ID, d.now().Add(backoff), d.now())
		return errors.Join(fmt.Errorf("node did not take it: %w", err), uerr)
	}
	switch reply.Status {
	case hostproto.TaskAccepted, hostproto.TaskDuplicate:
		log.Debug("node took task", "status", reply.Status)
		return tasks.Accept(ctx, d.cfg.Pool, c.ID, d.now())
	default:
		log.Error("node refused task", "reason", reply.Reason)
		return d.settle(ctx, c.NodeID, hostproto.TaskResult{NodeID: c.NodeID, TaskID: c.ID, Status: hostproto.TaskFailed,
			Error: "refused by node: " + reply.Reason, At: d.now()})
	}
}

// pending returns fresh envelopes for every unfinished task of a node.
func (d *Service) pending(ctx context.Context, nodeID string) (hostproto.PullResponse, error) {
	out := hostproto.PullResponse{Tasks: []hostproto.SignedTask{}}
	list, err := tasks.PendingFor(ctx, d.cfg.Pool, nodeID)
	if err != nil {
		return out, err
	}
	for _, x := range list {
		env, err := d.envelope(x.ID, nodeID, x.Type, x.Params, x.Corr)
		if err != nil {
			return out, err
		}
		out.Tasks = append(out.Tasks, hostproto.SignedTask{Payload: env.Payload, Signature: env.Signature})
	}
	return out, nil
}

// expire fails tasks no node finished in time: nothing may wait forever on
// a node that is gone.
func (d *Service) expire(ctx context.Context) error {
	now := d.now()
	list, err := tasks.OverdueBefore(ctx, d.cfg.Pool, now.Add(-d.cfg.TaskDeadline), claimBatch)
	if err != nil {
		return err
	}
	for _, o := range list {
		status, msg := hostproto.TaskFailed, "no node took the task within "+d.cfg.TaskDeadline.String()
		if o.State == "accepted" || o.State == "running" {
			status, msg = hostproto.TaskInterrupted, "the node did not finish the task within "+d.cfg.TaskDeadline.String()
		}
		if err := d.settle(ctx, o.NodeID, hostproto.TaskResult{NodeID: o.NodeID, TaskID: o.ID, Status: status, Error: msg, At: now}); err != nil {
			return err
		}
	}
	return nil
}
