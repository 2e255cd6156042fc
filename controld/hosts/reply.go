package hosts

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/signing"
)

// ErrForeignReply is why a task reply was ignored: it is not the node's
// signed answer to the delivery it was received for.
var ErrForeignReply = errors.New("task reply is not the node's answer to this delivery")

// request delivers a task envelope to its node and returns the node's
// answer. Every reply on the delivery's inbox is checked (openReply); one
// that is not the node's signed answer to this very delivery is logged,
// counted and skipped, and the wait goes on until ctx ends, so a forged
// "refused" published in the node's name neither fails the task nor hides
// the real answer. No valid answer in time is a failed delivery, retried
// with backoff like a node that did not answer.
func (d *Service) request(ctx context.Context, c tasks.Claimed, env hostproto.Sealed[signing.Task]) (hostproto.TaskReply, error) {
	del, err := hostproto.Deliver(d.cfg.NATS, hostproto.MsgTask, c.NodeID, env)
	if err != nil {
		return hostproto.TaskReply{}, err
	}
	defer del.Close()
	for {
		sealed, err := del.Next(ctx)
		if err != nil && !errors.Is(err, hostproto.ErrMalformed) {
			return hostproto.TaskReply{}, err
		}
		reply, err := d.openReply(ctx, c, del.Digest(), sealed, err)
		if err != nil {
			d.refusals.taskReply.Add(1)
			d.cfg.Log.Warn("task reply ignored", "task", c.ID, "node", c.NodeID, "err", err)
			continue
		}
		return reply, nil
	}
}

// openReply accepts a reply (sealed, as Delivery.Next decoded it; bad:
// why it did not decode) signed with the node's enrolled key, naming the
// task, the node and the delivery (its digest) it answers.
func (d *Service) openReply(ctx context.Context, c tasks.Claimed, digest []byte, sealed hostproto.Sealed[hostproto.TaskReply], bad error) (hostproto.TaskReply, error) {
	key, err := d.nodeKey(ctx, c.NodeID)
	if err != nil {
		return hostproto.TaskReply{}, err
	}
	if bad != nil || len(sealed.Payload) == 0 {
		return hostproto.TaskReply{}, fmt.Errorf("%w: not a signed reply", ErrForeignReply)
	}
	var reply hostproto.TaskReply
	if err := hostproto.Open(key, sealed, &reply); err != nil {
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
