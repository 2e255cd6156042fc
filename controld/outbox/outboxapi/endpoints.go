// Package outboxapi declares the endpoints of the outbox and the event
// stream: `gpuaas ops outbox` over the events the relay gave up
// publishing, and events.since, which clients resume from after a
// reconnect. It is apart from package outbox because every mutation
// enqueues its events through outbox (controld/mutate imports it), and
// endpoints are declared with controld/endpoint, which imports mutate
// (docs/decisions/0069-domain-endpoints.md).
package outboxapi

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Bounds of ops.outbox_list.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// Deps are what the outbox's and the event stream's endpoints need of
// the server.
type Deps struct {
	DB store.Querier
	// JS reads the event stream for events.since: users never get
	// JetStream access, so controld reads it for them.
	JS  jetstream.JetStream
	Now func() time.Time
}

// Endpoints are `gpuaas ops outbox` (list, retry, drop) and events.since.
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Query(api.OpOutboxList, h.list),
		endpoint.Mutation(api.OpOutboxRetry, h.retry),
		endpoint.Mutation(api.OpOutboxDrop, h.drop),
		endpoint.Query(api.OpEventsSince, h.since),
	}
}

type handlers struct{ Deps }

func (h handlers) list(ctx context.Context, _ *endpoint.Request, req api.OutboxListRequest) (*api.OutboxListResponse, error) {
	if req.State == "" {
		req.State = api.OutboxDead
	}
	if !slices.Contains(outbox.States, req.State) {
		return nil, api.Errorf(api.CodeInvalidArgument, "unknown outbox state %q (one of %v)", req.State, outbox.States)
	}
	switch {
	case req.Limit == 0:
		req.Limit = DefaultListLimit
	case req.Limit < 0 || req.Limit > MaxListLimit:
		return nil, api.Errorf(api.CodeInvalidArgument, "limit must be between 1 and %d", MaxListLimit)
	}
	events, err := outbox.List(ctx, h.DB, req.State, req.Limit)
	if err != nil {
		return nil, err
	}
	return &api.OutboxListResponse{Events: events}, nil
}

// retry puts a dead event back in the relay's queue. The retry emits no
// event of its own: the retried event, once published, is the news.
func (h handlers) retry(_ context.Context, _ *endpoint.Request, req api.OutboxRef) (endpoint.Work[api.OutboxEvent], error) {
	return change(req, "outbox.retry", func(ctx context.Context, tx pgx.Tx, id int64) (api.OutboxEvent, error) {
		return outbox.Retry(ctx, tx, id, h.Now())
	})
}

// drop gives up on a dead event; the row stays, as dropped.
func (h handlers) drop(_ context.Context, _ *endpoint.Request, req api.OutboxRef) (endpoint.Work[api.OutboxEvent], error) {
	return change(req, "outbox.drop", func(ctx context.Context, tx pgx.Tx, id int64) (api.OutboxEvent, error) {
		return outbox.Drop(ctx, tx, id)
	})
}

// change is an operator's change of one dead event, audited with what
// the relay last saw of it.
func change(req api.OutboxRef, action string, fn func(ctx context.Context, tx pgx.Tx, id int64) (api.OutboxEvent, error)) (endpoint.Work[api.OutboxEvent], error) {
	if req.ID <= 0 {
		return nil, api.Errorf(api.CodeInvalidArgument, "an outbox event id is a positive number").
			WithHint("see `gpuaas ops outbox list`")
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.OutboxEvent, mutate.Effect, error) {
		e, err := fn(ctx, tx, req.ID)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &e, mutate.Effect{Audit: audit.Entry{Action: action, TargetType: "outbox_event",
			TargetID: strconv.FormatInt(e.ID, 10), Detail: map[string]any{"kind": e.Kind, "subject": e.Subject,
				"attempts": e.Attempts, "last_error": e.LastError}}}, nil
	}, nil
}

// since reads the caller's own events from the event stream, after a
// reconnect.
func (h handlers) since(ctx context.Context, r *endpoint.Request, req api.EventsSinceRequest) (*api.EventsSinceResponse, error) {
	switch {
	case req.Limit == 0:
		req.Limit = api.MaxEventsSince
	case req.Limit < 0 || req.Limit > api.MaxEventsSince:
		return nil, api.Errorf(api.CodeInvalidArgument, "limit must be between 1 and %d", api.MaxEventsSince)
	}
	return endpoint.Pointer(outbox.Since(ctx, h.JS, r.Principal.UserID, req))
}
