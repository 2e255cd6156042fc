package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// fanoutConsumer is the durable consumer shared by every controld replica.
const fanoutConsumer = "user-fanout"

// gateFlushTimeout bounds waiting for the server to take a revocation
// before the event is acked.
const gateFlushTimeout = 5 * time.Second

// Fanout forwards each event of the EVENTS stream to the subjects of the
// users it names, gpuaas.user.<uid>.evt.<kind>. Delivery is at least once;
// events carry their outbox id and their stream sequence (Seq) so
// consumers can drop repeats and resume after a reconnect (Since).
//
// A copy that NATS loses after the publish (a route between servers
// cut, a server gone with the message still queued to another) is not
// noticed here: the event is acked once its copies are handed to the
// connection. The client notices instead: each user's copy carries the
// stream sequence of that user's previous event (api.Event.Prev, kept in
// HeadsBucket before the copy is sent), so a client that has not seen it
// reads the missing events back (events.since), and a quiet client asks
// for its head to notice a lost last event
// (docs/decisions/0009-user-event-sequence.md).
//
// Events reach users in stream order: the consumer lets one event out at
// a time (MaxAckPending 1), across every replica, so a replica cannot
// forward an allocation's later event while another is still forwarding
// an earlier one, and a nak'd event is sent again before any after it.
// The relay puts a subject's events in the stream in order (RunOnce).
//
// An alloc.notice event also goes, whole, to gateproto.GateNoticeSubject, where
// every sshgate writes its message into the allocation's open sessions.
//
// A session.revoked event also goes, as its api.SessionRevoked body, to
// gateproto.GateRevokedSubject, where every sshgate listens to end the SSH
// sessions of those logins. That one is flushed to the server before the
// event is acked, so a revocation is not lost to a connection dropping
// with the publish still buffered; a failed publish or flush naks the
// event and JetStream delivers it again.
func Fanout(ctx context.Context, js jetstream.JetStream, nc *nats.Conn, log *slog.Logger) error {
	cons, err := js.CreateOrUpdateConsumer(ctx, api.EventStreamName, jetstream.ConsumerConfig{
		Durable:       fanoutConsumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		MaxAckPending: 1,
	})
	if err != nil {
		return fmt.Errorf("fanout consumer: %w", err)
	}
	heads, err := ensureHeads(ctx, js)
	if err != nil {
		return fmt.Errorf("fanout: %w", err)
	}
	var lastErr atomic.Pointer[error]
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var ev api.Event
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			log.Error("fanout: undecodable event", "err", err)
			_ = m.Term()
			return
		}
		// Users get the event with its stream sequence, to resume from
		// after a reconnect (events.since), and each the sequence of
		// their previous event, to notice one lost on the way.
		data := m.Data()
		if meta, err := m.Metadata(); err == nil {
			ev.Seq = meta.Sequence.Stream
			if b, err := json.Marshal(ev); err == nil {
				data = b
			}
		}
		copies, err := userCopies(ctx, heads, ev, data)
		if err != nil {
			// Stopping mid-event is not a fault: the event is handed out
			// again (to this replica's successor) and nothing is lost.
			if ctx.Err() == nil {
				log.Warn("fanout: record users' last event; retrying", "event", ev.ID, "err", err)
			}
			_ = m.Nak()
			return
		}
		for i, u := range ev.Users {
			if err := nc.Publish(api.UserEventSubject(u, ev.Kind), copies[i]); err != nil {
				_ = m.Nak()
				return
			}
		}
		if ev.Kind == api.EventSessionRevoked {
			switch err := publishRevoked(nc, ev); {
			case errors.Is(err, errBadRevocation):
				log.Error("fanout: revocation not sent to the gateways", "event", ev.ID, "err", err)
			case err != nil:
				log.Warn("fanout: tell the gateways of a revocation; retrying", "event", ev.ID, "err", err)
				_ = m.Nak()
				return
			}
		}
		if ev.Kind == api.EventAllocNotice {
			// The gateways write it into the allocation's open sessions.
			if err := publishGate(nc, gateproto.GateNoticeSubject, data); err != nil {
				log.Warn("fanout: hand a notice to the gateways; retrying", "event", ev.ID, "err", err)
				_ = m.Nak()
				return
			}
		}
		_ = m.Ack()
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { lastErr.Store(&err) }))
	if err != nil {
		return fmt.Errorf("fanout consume: %w", err)
	}
	defer cc.Stop()
	return WaitConsume(ctx, cons, cc, &lastErr)
}

// WaitConsume waits for ctx to end, or for the consumer to stop by itself
// or vanish (the server deleted it: jetstream stops Consume on "consumer
// deleted" when a pull is waiting, and otherwise pulls from nothing for
// good): then it returns an error for the supervisor to create the
// consumer again, instead of leaving the loop running with nothing
// delivered.
func WaitConsume(ctx context.Context, cons jetstream.Consumer, cc jetstream.ConsumeContext, lastErr *atomic.Pointer[error]) error {
	t := time.NewTicker(consumerCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-cc.Closed():
			if ctx.Err() != nil {
				return nil
			}
			if p := lastErr.Load(); p != nil {
				return fmt.Errorf("%w: %w", ErrConsumerStopped, *p)
			}
			return ErrConsumerStopped
		case <-t.C:
			// Other errors (NATS unreachable) are the client's to ride out.
			if _, err := cons.Info(ctx); errors.Is(err, jetstream.ErrConsumerNotFound) {
				return fmt.Errorf("%w: %w", ErrConsumerStopped, err)
			}
		}
	}
}

// consumerCheckEvery is how often WaitConsume checks that its consumer
// still exists.
const consumerCheckEvery = 5 * time.Second

// ErrConsumerStopped is a JetStream consumer that stopped delivering by
// itself.
var ErrConsumerStopped = errors.New("consumer stopped")

// errBadRevocation is a session.revoked payload that names no sessions:
// retrying could not fix it.
var errBadRevocation = errors.New("session.revoked event without sessions")

// publishRevoked sends a session.revoked event's payload to the gateways
// and waits until the server has it.
func publishRevoked(nc *nats.Conn, ev api.Event) error {
	var body api.SessionRevoked
	if err := json.Unmarshal(ev.Data, &body); err != nil || len(body.SessionIDs) == 0 {
		return fmt.Errorf("%w: %s", errBadRevocation, ev.Data)
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	if err := nc.Publish(gateproto.GateRevokedSubject, data); err != nil {
		return err
	}
	return nc.FlushTimeout(gateFlushTimeout)
}

// headWrites bounds the heads an event's fan-out records at once.
const headWrites = 16

// userCopies is userCopy for each of ev's users, in the order of
// ev.Users. The users' heads are independent keys, recorded at once: an
// event for a project's many members costs about one round trip to the
// bucket, not one per member.
func userCopies(ctx context.Context, heads jetstream.KeyValue, ev api.Event, data []byte) ([][]byte, error) {
	copies := make([][]byte, len(ev.Users))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(headWrites)
	for i, u := range ev.Users {
		g.Go(func() error {
			c, err := userCopy(gctx, heads, ev, u, data)
			copies[i] = c
			return err
		})
	}
	return copies, g.Wait()
}

// userCopy is the event as user is sent it: with the sequence of their
// previous event (Prev), recorded in heads first. data is the event
// without Prev, used as is when the event has no stream sequence.
func userCopy(ctx context.Context, heads jetstream.KeyValue, ev api.Event, user string, data []byte) ([]byte, error) {
	if ev.Seq == 0 {
		return data, nil
	}
	prev, err := advanceHead(ctx, heads, user, ev.Seq)
	if err != nil || prev == 0 {
		return data, err
	}
	ev.Prev = prev
	return json.Marshal(ev)
}

// publishGate sends data to a gateway subject and waits until the server
// has it.
func publishGate(nc *nats.Conn, subject string, data []byte) error {
	if err := nc.Publish(subject, data); err != nil {
		return err
	}
	return nc.FlushTimeout(gateFlushTimeout)
}
