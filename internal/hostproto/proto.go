// Package hostproto is the host protocol: what controld and hostd say to
// each other over NATS (enrollment, signed tasks and their replies, node
// reports, node logs and GPU telemetry) and the payloads of the task types.
// Each request-reply or published message is declared once, as a Message
// value (the Msg… variables): its name, subject, request and response
// types, which side sends it, whether its request is sealed with a key and
// whether sending the same bytes again is allowed. Senders go through
// Request, RequestSealed, Publish, Ask and Deliver, receivers get each
// request decoded as declared through Serve and ServeSealed (controld) or
// Subscribe and SubscribeSealed (hostd), so both ends are checked against
// the declaration by the compiler
// (docs/decisions/0065-one-wire-package-per-protocol.md).
package hostproto

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/signing"
)

// Sender is the side of the host protocol that sends a message.
type Sender int

const (
	_ Sender = iota // no sender
	// Hostd sends enrollment and node reports (to controld's queue group).
	Hostd
	// Controld sends tasks and asks a node for its logs and telemetry.
	Controld
)

// String is the sender's name.
func (s Sender) String() string {
	switch s {
	case Hostd:
		return "hostd"
	case Controld:
		return "controld"
	}
	return fmt.Sprintf("sender(%d)", int(s))
}

// Spec is what is known of a host-protocol message apart from its Go
// types.
type Spec struct {
	// Name is host.<what>, for logs and tests.
	Name string
	From Sender
	// Kind is the report kind of a node report (ReportStamp.Kind, the last
	// token of gpuaas.ctl.host.<node>.<kind>); "" for other messages.
	Kind string
	// Sealed: the request body is a signing envelope around Request,
	// signed with the node's key (reports) or a task key (tasks).
	Sealed bool
	// Published: the sender publishes and waits for no reply (heartbeats,
	// progress); the receiver answers only a request that asks.
	Published bool
	// Replay: the receiver takes the same request body twice (a task is
	// answered as a duplicate; logs and telemetry are reads). Reports are
	// single-use (ReportStamp) and sealed afresh for every send;
	// enrollment spends a one-time token.
	Replay bool
	// Request and Response are the Go types of the bodies (Request inside
	// the envelope when Sealed; a sealed reply says so: Sealed[TaskReply]).
	Request, Response reflect.Type

	subject  func(nodeID string) string
	wildcard string
}

// Message is the declaration of one host-protocol message carrying Req
// and answered with Resp.
type Message[Req, Resp any] struct{ spec Spec }

// Spec returns the message's name, sender and flags.
func (m Message[Req, Resp]) Spec() Spec { return m.spec }

// SubjectOf is the message's subject for node nodeID (enrollment has one
// subject for every node).
func (m Message[Req, Resp]) SubjectOf(nodeID string) string { return m.spec.subject(nodeID) }

// Wildcard matches the message's subject for every node: what controld
// subscribes to.
func (m Message[Req, Resp]) Wildcard() string { return m.spec.wildcard }

// Sealed is a signing envelope (internal/signing's Envelope, converted)
// whose payload is a Req.
type Sealed[Req any] struct {
	Payload   []byte `json:"payload"`
	Signature []byte `json:"signature"`
}

// registry holds every declared message by name.
var registry = map[string]Spec{}

// declare records a message; a second one of a name, or one without a
// sender, is a programming error found when the package loads.
func declare[Req, Resp any](s Spec) Message[Req, Resp] {
	s.Request, s.Response = reflect.TypeFor[Req](), reflect.TypeFor[Resp]()
	if s.Name == "" || s.From == 0 || s.subject == nil || s.wildcard == "" {
		panic(fmt.Sprintf("hostproto: message %q is incomplete", s.Name))
	}
	if _, dup := registry[s.Name]; dup {
		panic(fmt.Sprintf("hostproto: message %s declared twice", s.Name))
	}
	registry[s.Name] = s
	return Message[Req, Resp]{spec: s}
}

// report declares a node report of kind on gpuaas.ctl.host.<node>.<kind>.
func report[Req, Resp any](kind string, published bool) Message[Req, Resp] {
	return declare[Req, Resp](Spec{Name: "host." + kind, From: Hostd, Kind: kind, Sealed: true, Published: published,
		subject:  func(nodeID string) string { return hostCtlSubject(nodeID, kind) },
		wildcard: hostCtlSubject("*", kind)})
}

// toNode declares a message controld sends to one node on
// gpuaas.host.<node>.<what>.
func toNode[Req, Resp any](what string, sealed bool) Message[Req, Resp] {
	return declare[Req, Resp](Spec{Name: "host." + what, From: Controld, Sealed: sealed, Replay: true,
		subject:  func(nodeID string) string { return "gpuaas.host." + nodeID + "." + what },
		wildcard: "gpuaas.host.*." + what})
}

// The messages of the host protocol.
var (
	// MsgEnroll registers a node once, with a one-time token; hostd sends
	// it again only when no controld answered (the token was not spent).
	MsgEnroll = declare[EnrollRequest, EnrollResponse](Spec{Name: "host.enroll", From: Hostd,
		subject: func(string) string { return SubjectEnroll }, wildcard: SubjectEnroll})
	// MsgHeartbeat is a node's periodic health report (published).
	MsgHeartbeat = report[Heartbeat, HostAck](HostHeartbeat, true)
	// MsgProgress reports one phase of a running task (published).
	MsgProgress = report[TaskProgress, HostAck](HostProgress, true)
	// MsgResult is a task's outcome; hostd resends it, sealed afresh,
	// until controld acknowledges.
	MsgResult = report[TaskResult, HostAck](HostResult, false)
	// MsgPull asks for the node's unfinished tasks.
	MsgPull = report[PullRequest, PullResponse](HostPull, false)
	// MsgCAs asks for the internal CA's keys (signed like a pull).
	MsgCAs = report[PullRequest, api.SSHCAsResponse](HostCAs, false)
	// MsgFault reports a GPU fault; resent until acknowledged.
	MsgFault = report[GPUFault, HostAck](HostFault, false)
	// MsgTask delivers a task sealed with a task key; hostd answers with
	// a TaskReply sealed with the node's key, and answers a second
	// delivery of the same task as a duplicate.
	MsgTask = toNode[signing.Task, Sealed[TaskReply]]("task", true)
	// MsgLogs asks a node for its recent log records.
	MsgLogs = toNode[HostLogsRequest, api.NodeLogsResponse]("logs", false)
	// MsgTop asks a node for its GPUs' telemetry.
	MsgTop = toNode[HostTopRequest, HostTopResponse]("top", false)
)

// Messages lists every declared message.
func Messages() []Spec {
	out := make([]Spec, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	return out
}

// Request sends hostd's plain (unsealed) request m over c and decodes the
// reply: enrollment.
func Request[Req, Resp any](ctx context.Context, c *api.Client, m Message[Req, Resp], nodeID string, req Req) (*Resp, error) {
	if m.spec.Sealed || m.spec.From != Hostd {
		return nil, fmt.Errorf("hostproto: %s is not a plain request from hostd", m.spec.Name)
	}
	out := new(Resp)
	return out, c.Request(ctx, m.SubjectOf(nodeID), req, out)
}

// RequestSealed sends hostd's sealed report env (a Req sealed with the
// node's key) and decodes controld's reply.
func RequestSealed[Req, Resp any](ctx context.Context, c *api.Client, m Message[Req, Resp], nodeID string, env Sealed[Req]) (*Resp, error) {
	if !m.spec.Sealed || m.spec.From != Hostd {
		return nil, fmt.Errorf("hostproto: %s is not a sealed report", m.spec.Name)
	}
	out := new(Resp)
	return out, c.Request(ctx, m.SubjectOf(nodeID), env, out)
}

// Publish publishes hostd's sealed report env without waiting for a
// reply: heartbeats and progress.
func Publish[Req, Resp any](nc *nats.Conn, m Message[Req, Resp], nodeID string, env Sealed[Req]) error {
	if !m.spec.Published {
		return fmt.Errorf("hostproto: %s is not published", m.spec.Name)
	}
	b, err := json.Marshal(env)
	if err != nil {
		return err
	}
	return nc.Publish(m.SubjectOf(nodeID), b)
}

// Ask sends controld's request req to node nodeID and decodes its reply.
// Transport errors (nats.ErrNoResponders, timeouts) are returned as they
// are, for the caller to word.
func Ask[Req, Resp any](ctx context.Context, nc *nats.Conn, m Message[Req, Resp], nodeID string, req Req) (*Resp, error) {
	if m.spec.From != Controld || m.spec.Sealed {
		return nil, fmt.Errorf("hostproto: %s is not a plain request from controld", m.spec.Name)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	msg, err := nc.RequestWithContext(ctx, m.SubjectOf(nodeID), body)
	if err != nil {
		return nil, err
	}
	out := new(Resp)
	if err := json.Unmarshal(msg.Data, out); err != nil {
		return nil, fmt.Errorf("%s reply: %w", m.spec.Name, err)
	}
	return out, nil
}

// Route is one subscription of controld to a hostd message: the subject
// matching every node's, and the handler, whose reply type the compiler
// checked against the declaration.
type Route struct {
	Spec    Spec
	Subject string
	Handle  func(ctx context.Context, m *nats.Msg) (any, error)
}

// Serve pairs controld's handler of hostd's plain request m (enrollment)
// with m's subject for every node; the handler gets each request decoded
// as m declares.
func Serve[Req, Resp any](m Message[Req, Resp], h func(ctx context.Context, in Inbound[Req, Resp]) (*Resp, error)) Route {
	if m.spec.Sealed {
		panic(fmt.Sprintf("hostproto: %s is sealed: ServeSealed", m.spec.Name))
	}
	return route(m, func(ctx context.Context, msg *nats.Msg) (*Resp, error) { return h(ctx, m.Inbound(msg)) })
}

// ServeSealed pairs controld's handler of hostd's sealed report m with
// m's subject for every node; the handler gets each envelope decoded, to
// open with the node's key.
func ServeSealed[Req, Resp any](m Message[Req, Resp], h func(ctx context.Context, in Inbound[Sealed[Req], Resp]) (*Resp, error)) Route {
	if !m.spec.Sealed {
		panic(fmt.Sprintf("hostproto: %s is not sealed: Serve", m.spec.Name))
	}
	return route(m, func(ctx context.Context, msg *nats.Msg) (*Resp, error) { return h(ctx, m.InboundSealed(msg)) })
}

func route[Req, Resp any](m Message[Req, Resp], h func(ctx context.Context, msg *nats.Msg) (*Resp, error)) Route {
	if m.spec.From != Hostd {
		panic(fmt.Sprintf("hostproto: controld does not serve %s (sent by %s)", m.spec.Name, m.spec.From))
	}
	return Route{Spec: m.spec, Subject: m.Wildcard(), Handle: func(ctx context.Context, msg *nats.Msg) (any, error) {
		resp, err := h(ctx, msg)
		if resp == nil {
			return nil, err
		}
		return resp, err
	}}
}

// NodeReportsPermission is the subject pattern a node may publish its
// reports to (controld's auth callout grants it to the node's identity).
func NodeReportsPermission(nodeID string) string { return hostCtlSubject(nodeID, ">") }

// NodeSubscribePermission is the subject pattern a node may subscribe to:
// every message controld sends it (MsgTask, MsgLogs, MsgTop).
func NodeSubscribePermission(nodeID string) string { return "gpuaas.host." + nodeID + ".>" }
