package hosts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/signing"
)

// ErrForeignReply is why a task reply was ignored: it is not the node's
// signed answer to the delivery it was received for.
var ErrForeignReply = errors.New("task reply is not the node's answer to this delivery")

// request delivers a task envelope (body) to its node and returns the
// node's answer. Every message on the reply inbox is checked (openReply);
// one that is not the node's signed answer to this very delivery is
// logged, counted and skipped, and the wait goes on until ctx ends, so a
// forged "refused" published in the node's name neither fails the task
// nor hides the real answer. No valid answer in time is a failed delivery,
// retried with backoff like a node that did not answer.
func (d *Service) request(ctx context.Context, c tasks.Claimed, body []byte) (hostproto.TaskReply, error) {
	nc := d.cfg.NATS
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return hostproto.TaskReply{}, fmt.Errorf("reply inbox: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := hostproto.Deliver(nc, c.NodeID, inbox, body); err != nil {
		return hostproto.TaskReply{}, fmt.Errorf("deliver: %w", err)
	}
	digest := hostproto.DeliveryDigest(body)
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return hostproto.TaskReply{}, err
		}
		if len(msg.Data) == 0 && msg.Header.Get("Status") == "503" {
			return hostproto.TaskReply{}, nats.ErrNoResponders
		}
		reply, err := d.openReply(ctx, c, digest, msg.Data)
		if err != nil {
			d.refusals.taskReply.Add(1)
			d.cfg.Log.Warn("task reply ignored", "task", c.ID, "node", c.NodeID, "err", err)
			continue
		}
		return reply, nil
	}
}

// openReply accepts a reply signed with the node's enrolled key, naming
// the task, the node and the delivery (its digest) it answers.
func (d *Service) openReply(ctx context.Context, c tasks.Claimed, digest, data []byte) (hostproto.TaskReply, error) {
	key, err := d.nodeKey(ctx, c.NodeID)
	if err != nil {
		return hostproto.TaskReply{}, err
	}
	var env signing.Envelope
	if err := json.Unmarshal(data, &env); err != nil || len(env.Payload) == 0 {
		return hostproto.TaskReply{}, fmt.Errorf("%w: not a signed reply", ErrForeignReply)
	}
	var reply hostproto.TaskReply
	if err := signing.Open(key, env, &reply); err != nil {
		return hostproto.TaskReply{}, fmt.Errorf("%w: %v", ErrForeignReply, err)
	}
	switch {
	case reply.NodeID != c.NodeID:
		return hostproto.TaskReply{}, fmt.Errorf("%w: signed for node %q", ErrForeignReply, reply.NodeID)
	case reply.TaskID != c.ID:
		return hostproto.TaskReply{}, fmt.Errorf("%w: signed for task %q", ErrForeignReply, reply.TaskID)
	case !bytes.Equal(reply.Delivery, digest):
		return hostproto.TaskReply{}, fmt.Errorf("%w: signed for another delivery", ErrForeignReply)
	}
	return reply, nil
}
