package hosts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/signing"
)

// redeliverAfter is when a task that was sent but never answered (controld
// died mid-delivery, or the reply was lost) is sent again.
const redeliverAfter = 30 * time.Second

// unfinished are the task states that block later tasks of the same
// allocation: an allocation's tasks run one at a time, in order.
const unfinished = `('pending', 'dispatched', 'accepted', 'running')`

type claimed struct {
	id, nodeID, typ string
	params          []byte
	attempts        int
}

// dispatchLoop delivers due tasks as they are queued (LISTEN node_tasks)
// or become due, and fails tasks past their deadline.
func (d *Service) dispatchLoop(ctx context.Context) error {
	pc, err := d.cfg.Pool.Acquire(ctx)
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("dispatcher: %w", err))
	}
	// This connection only listens; it is ours, not the pool's.
	conn := pc.Hijack()
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, `LISTEN node_tasks`); err != nil {
		return ctxErr(ctx, fmt.Errorf("dispatcher listen: %w", err))
	}
	notified := make(chan struct{}, 1)
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		for {
			if _, err := conn.WaitForNotification(ctx); err != nil {
				return
			}
			select {
			case notified <- struct{}{}:
			default:
			}
		}
	}()
	defer func() { <-listening }()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := d.expire(ctx); err != nil && ctx.Err() == nil {
			d.cfg.Log.Warn("expire tasks", "err", err)
		}
		for {
			n, err := d.dispatchOnce(ctx)
			if err != nil && ctx.Err() == nil {
				d.cfg.Log.Warn("dispatch", "err", err)
			}
			if n == 0 || err != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-notified:
		case <-d.wake:
		}
	}
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// dispatchOnce claims a batch of due tasks and delivers them concurrently.
func (d *Service) dispatchOnce(ctx context.Context) (int, error) {
	now := d.now()
	rows, err := d.cfg.Pool.Query(ctx, `UPDATE node_tasks t SET state = 'dispatched', dispatched_at = $1,
			attempts = attempts + 1, updated_at = $1
		WHERE t.id IN (
			SELECT c.id FROM node_tasks c
			WHERE ((c.state = 'pending' AND c.next_attempt_at <= $1) OR (c.state = 'dispatched' AND c.dispatched_at < $2))
			  AND NOT EXISTS (SELECT 1 FROM node_tasks p WHERE c.allocation_id IS NOT NULL
			      AND p.allocation_id = c.allocation_id AND p.state IN `+unfinished+`
			      AND (p.created_at, p.id) < (c.created_at, c.id))
			ORDER BY c.created_at, c.id LIMIT 64 FOR UPDATE SKIP LOCKED)
		RETURNING t.id, t.node_id, t.type, t.params, t.attempts`, now, now.Add(-redeliverAfter))
	if err != nil {
		return 0, fmt.Errorf("claim tasks: %w", err)
	}
	batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimed, error) {
		var c claimed
		return c, r.Scan(&c.id, &c.nodeID, &c.typ, &c.params, &c.attempts)
	})
	if err != nil {
		return 0, fmt.Errorf("claim tasks: %w", err)
	}
	var wg sync.WaitGroup
	for _, c := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := d.deliver(ctx, c)
			switch {
			case err == nil || ctx.Err() != nil:
			case errors.Is(err, nats.ErrNoResponders):
				// The node is offline (or enrolling): it pulls on connect.
				d.cfg.Log.Debug("node not listening; task stays pending", "task", c.id, "node", c.nodeID)
			default:
				d.cfg.Log.Warn("deliver task", "task", c.id, "node", c.nodeID, "err", err)
			}
		}()
	}
	wg.Wait()
	return len(batch), nil
}

// envelope signs a task for its node.
func (d *Service) envelope(id, nodeID, typ string, params []byte) (signing.Envelope, error) {
	now := d.now()
	return signing.Sign(d.cfg.TaskKey, signing.Task{ID: id, NodeID: nodeID, Type: typ, Params: params,
		IssuedAt: now, ExpiresAt: now.Add(d.cfg.EnvelopeTTL)})
}

// deliver sends one task and records hostd's answer. A node that does not
// answer keeps the task pending, retried with backoff; it also pulls its
// tasks itself when it reconnects.
func (d *Service) deliver(ctx context.Context, c claimed) error {
	env, err := d.envelope(c.id, c.nodeID, c.typ, c.params)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(env)
	rctx, cancel := context.WithTimeout(ctx, d.cfg.DeliveryTimeout)
	defer cancel()
	reply, err := d.request(rctx, c, body)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		backoff := min(time.Duration(1<<min(c.attempts, 8))*250*time.Millisecond, time.Minute)
		if errors.Is(err, nats.ErrNoResponders) {
			backoff = min(backoff, 5*time.Second) // the node pulls on reconnect anyway
		}
		_, uerr := d.cfg.Pool.Exec(ctx, `UPDATE node_tasks SET state = 'pending', next_attempt_at = $2, updated_at = $3
			WHERE id = $1 AND state = 'dispatched'`, c.id, d.now().Add(backoff), d.now())
		return errors.Join(fmt.Errorf("node did not take it: %w", err), uerr)
	}
	switch reply.Status {
	case api.TaskAccepted, api.TaskDuplicate:
		_, err = d.cfg.Pool.Exec(ctx, `UPDATE node_tasks SET state = 'accepted', accepted_at = $2, updated_at = $2
			WHERE id = $1 AND state = 'dispatched'`, c.id, d.now())
		return err
	default:
		d.cfg.Log.Error("node refused task", "task", c.id, "node", c.nodeID, "reason", reply.Reason)
		return d.settle(ctx, c.nodeID, api.TaskResult{NodeID: c.nodeID, TaskID: c.id, Status: api.TaskFailed,
			Error: "refused by node: " + reply.Reason, At: d.now()})
	}
}

// pending returns fresh envelopes for every unfinished task of a node.
func (d *Service) pending(ctx context.Context, nodeID string) (api.PullResponse, error) {
	rows, err := d.cfg.Pool.Query(ctx, `SELECT c.id, c.type, c.params FROM node_tasks c
		WHERE c.node_id = $1 AND c.state IN `+unfinished+`
		  AND NOT EXISTS (SELECT 1 FROM node_tasks p WHERE c.allocation_id IS NOT NULL
		      AND p.allocation_id = c.allocation_id AND p.state IN `+unfinished+`
		      AND (p.created_at, p.id) < (c.created_at, c.id))
		ORDER BY c.created_at, c.id`, nodeID)
	if err != nil {
		return api.PullResponse{}, fmt.Errorf("pending tasks: %w", err)
	}
	out := api.PullResponse{Tasks: []api.SignedTask{}}
	type row struct {
		id, typ string
		params  []byte
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.id, &x.typ, &x.params)
	})
	if err != nil {
		return out, fmt.Errorf("pending tasks: %w", err)
	}
	for _, x := range list {
		env, err := d.envelope(x.id, nodeID, x.typ, x.params)
		if err != nil {
			return out, err
		}
		out.Tasks = append(out.Tasks, api.SignedTask{Payload: env.Payload, Signature: env.Signature})
	}
	return out, nil
}

// expire fails tasks no node finished in time: nothing may wait forever on
// a node that is gone.
func (d *Service) expire(ctx context.Context) error {
	now := d.now()
	rows, err := d.cfg.Pool.Query(ctx, `SELECT id, node_id, state FROM node_tasks
		WHERE state IN `+unfinished+` AND created_at < $1 ORDER BY created_at LIMIT 64`, now.Add(-d.cfg.TaskDeadline))
	if err != nil {
		return fmt.Errorf("find overdue tasks: %w", err)
	}
	type overdue struct{ id, nodeID, state string }
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (overdue, error) {
		var o overdue
		return o, r.Scan(&o.id, &o.nodeID, &o.state)
	})
	if err != nil {
		return fmt.Errorf("find overdue tasks: %w", err)
	}
	for _, o := range list {
		status, msg := api.TaskFailed, "no node took the task within "+d.cfg.TaskDeadline.String()
		if o.state == "accepted" || o.state == "running" {
			status, msg = api.TaskInterrupted, "the node did not finish the task within "+d.cfg.TaskDeadline.String()
		}
		if err := d.settle(ctx, o.nodeID, api.TaskResult{NodeID: o.nodeID, TaskID: o.id, Status: status, Error: msg, At: now}); err != nil {
			return err
		}
	}
	return nil
}

// livenessLoop marks nodes down when their heartbeats stop.
func (d *Service) livenessLoop(ctx context.Context) error {
	t := time.NewTicker(max(d.cfg.HeartbeatInterval/2, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now := d.now()
		down, err := node.MarkDown(ctx, d.cfg.Pool, now.Add(-d.cfg.DownAfter), now)
		if err != nil {
			if ctx.Err() == nil {
				d.cfg.Log.Warn("liveness", "err", err)
			}
			continue
		}
		for _, id := range down {
			d.cfg.Log.Warn("node down: no heartbeat", "node", id, "for", d.cfg.DownAfter)
		}
	}
}
