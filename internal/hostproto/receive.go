package hostproto

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/signing"
)

// ErrMalformed is behind Delivery.Next's error for a reply that does not
// decode as its message declares.
var ErrMalformed = errors.New("malformed host message")

// Inbound is one request of a host-protocol message as its receiver got
// it: Body is the body decoded as the message declares (Req, or
// Sealed[Req] for a sealed message), Err encoding/json's error when it
// did not decode (Body then holds what did). Resp is the declared reply.
// Receivers get one from Subscribe, SubscribeSealed, Serve or
// ServeSealed, never by decoding a NATS message themselves
// (docs/decisions/0065-one-wire-package-per-protocol.md).
type Inbound[Body, Resp any] struct {
	// Subject is the subject it arrived on: the message's, for one node.
	Subject string
	Body    Body
	Err     error

	data []byte
	msg  *nats.Msg
}

// Digest is DeliveryDigest of the body as received: what a TaskReply
// names to bind itself to this delivery.
func (in Inbound[Body, Resp]) Digest() []byte { return DeliveryDigest(in.data) }

// Reply answers the request with resp, encoded as the message declares.
// Only hostd's receivers (Subscribe, SubscribeSealed) reply this way;
// controld's handlers return their reply to the route.
func (in Inbound[Body, Resp]) Reply(resp *Resp) error {
	if in.msg == nil {
		return fmt.Errorf("hostproto: reply to a request not received")
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	return in.msg.Respond(b)
}

// Inbound decodes msg, a request of m, as m declares its plain body:
// what Subscribe and Serve hand their handler.
func (m Message[Req, Resp]) Inbound(msg *nats.Msg) Inbound[Req, Resp] {
	return decodeInbound[Req, Resp](msg)
}

// InboundSealed decodes msg, a request of m, as the envelope around m's
// body: what SubscribeSealed and ServeSealed hand their handler.
func (m Message[Req, Resp]) InboundSealed(msg *nats.Msg) Inbound[Sealed[Req], Resp] {
	return decodeInbound[Sealed[Req], Resp](msg)
}

func decodeInbound[Body, Resp any](msg *nats.Msg) Inbound[Body, Resp] {
	in := Inbound[Body, Resp]{Subject: msg.Subject, data: msg.Data, msg: msg}
	in.Err = json.Unmarshal(msg.Data, &in.Body)
	return in
}

// Subscribe subscribes hostd, as node nodeID, to controld's plain
// request m on m's subject for that node; h gets each request decoded
// and answers it with Inbound.Reply (or not at all).
func Subscribe[Req, Resp any](nc *nats.Conn, m Message[Req, Resp], nodeID string, h func(Inbound[Req, Resp])) (*nats.Subscription, error) {
	if m.spec.From != Controld || m.spec.Sealed {
		return nil, fmt.Errorf("hostproto: %s is not a plain request from controld", m.spec.Name)
	}
	return nc.Subscribe(m.SubjectOf(nodeID), func(msg *nats.Msg) { h(m.Inbound(msg)) })
}

// SubscribeSealed subscribes hostd, as node nodeID, to controld's sealed
// request m (tasks); h gets each envelope decoded, to verify itself.
func SubscribeSealed[Req, Resp any](nc *nats.Conn, m Message[Req, Resp], nodeID string, h func(Inbound[Sealed[Req], Resp])) (*nats.Subscription, error) {
	if m.spec.From != Controld || !m.spec.Sealed {
		return nil, fmt.Errorf("hostproto: %s is not a sealed request from controld", m.spec.Name)
	}
	return nc.Subscribe(m.SubjectOf(nodeID), func(msg *nats.Msg) { h(m.InboundSealed(msg)) })
}

// Seal seals v with key: an envelope whose payload is v's JSON, typed as
// a T (internal/signing's Seal).
func Seal[T any](key ed25519.PrivateKey, v *T) (Sealed[T], error) {
	env, err := signing.Seal(key, v)
	return Sealed[T](env), err
}

// Open checks s's signature against key and decodes its payload into v
// (internal/signing's Open).
func Open[T any](key ed25519.PublicKey, s Sealed[T], v *T) error {
	return signing.Open(key, signing.Envelope(s), v)
}

// TaskIDOf reads the task id of a task envelope without verifying it: a
// reply echoes it, also for an envelope refused, so controld can match
// the reply to the task it delivered.
func TaskIDOf(env Sealed[signing.Task]) string {
	var t struct {
		ID string `json:"task_id"`
	}
	_ = json.Unmarshal(env.Payload, &t)
	return t.ID
}

// Delivery is one delivery of a sealed request (a task) to a node, with
// an inbox of its own for the replies: controld reads each itself, since
// it must check it against the delivery's digest.
type Delivery[Resp any] struct {
	sub    *nats.Subscription
	digest []byte
}

// Deliver publishes controld's sealed request env of m (MsgTask) to node
// nodeID with a fresh inbox for the replies. Close the delivery when
// done with it.
func Deliver[Req, Resp any](nc *nats.Conn, m Message[Req, Resp], nodeID string, env Sealed[Req]) (*Delivery[Resp], error) {
	if m.spec.From != Controld || !m.spec.Sealed {
		return nil, fmt.Errorf("hostproto: %s is not a sealed request from controld", m.spec.Name)
	}
	body, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("deliver: %w", err)
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("reply inbox: %w", err)
	}
	if err := nc.PublishRequest(m.SubjectOf(nodeID), inbox, body); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("deliver: %w", err)
	}
	return &Delivery[Resp]{sub: sub, digest: DeliveryDigest(body)}, nil
}

// Digest is DeliveryDigest of the body delivered.
func (d *Delivery[Resp]) Digest() []byte { return d.digest }

// Next waits for the next reply and decodes it as m's Resp: an error
// wrapping ErrMalformed for one that does not decode (the value then
// holds what did; the wait may go on), nats.ErrNoResponders when no node
// subscribed, ctx's error when it ends first.
func (d *Delivery[Resp]) Next(ctx context.Context) (Resp, error) {
	var out Resp
	msg, err := d.sub.NextMsgWithContext(ctx)
	if err != nil {
		return out, err
	}
	if len(msg.Data) == 0 && msg.Header.Get("Status") == "503" {
		return out, nats.ErrNoResponders
	}
	if err := json.Unmarshal(msg.Data, &out); err != nil {
		return out, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return out, nil
}

// Close stops listening for replies.
func (d *Delivery[Resp]) Close() { _ = d.sub.Unsubscribe() }
