package controld

import (
	"context"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Bounds of ops.outbox_list.
const (
	defaultOutboxLimit = 100
	maxOutboxLimit     = 1000
)

// outboxEndpoints are `gpuaas ops outbox`: the events the relay gave up
// publishing (controld/outbox).
func (s *Server) outboxEndpoints() []endpointDef {
	return []endpointDef{
		query(s, api.OpOutboxList, s.outboxList),
		mutation(s, api.OpOutboxRetry, s.outboxRetry),
		mutation(s, api.OpOutboxDrop, s.outboxDrop),
	}
}

func (s *Server) outboxList(ctx context.Context, c *call, req api.OutboxListRequest) (*api.OutboxListResponse, error) {
	if req.State == "" {
		req.State = api.OutboxDead
	}
	if !slices.Contains(outbox.States, req.State) {
		return nil, api.Errorf(api.CodeInvalidArgument, "unknown outbox state %q (one of %v)", req.State, outbox.States)
	}
	switch {
	case req.Limit == 0:
		req.Limit = defaultOutboxLimit
	case req.Limit < 0 || req.Limit > maxOutboxLimit:
		return nil, api.Errorf(api.CodeInvalidArgument, "limit must be between 1 and %d", maxOutboxLimit)
	}
	events, err := outbox.List(ctx, s.pool, req.State, req.Limit)
	if err != nil {
		return nil, err
	}
	return &api.OutboxListResponse{Events: events}, nil
}

// outboxRetry puts a dead event back in the relay's queue. The retry emits
// no event of its own: the retried event, once published, is the news.
func (s *Server) outboxRetry(_ context.Context, _ *call, req api.OutboxRef) (work[api.OutboxEvent], error) {
	return outboxChange(req, "outbox.retry", func(ctx context.Context, tx pgx.Tx, id int64) (api.OutboxEvent, error) {
		return outbox.Retry(ctx, tx, id, s.now())
	})
}

// outboxDrop gives up on a dead event; the row stays, as dropped.
func (s *Server) outboxDrop(_ context.Context, _ *call, req api.OutboxRef) (work[api.OutboxEvent], error) {
	return outboxChange(req, "outbox.drop", func(ctx context.Context, tx pgx.Tx, id int64) (api.OutboxEvent, error) {
		return outbox.Drop(ctx, tx, id)
	})
}

func outboxChange(req api.OutboxRef, action string, change func(ctx context.Context, tx pgx.Tx, id int64) (api.OutboxEvent, error)) (work[api.OutboxEvent], error) {
	if req.ID <= 0 {
		return nil, api.Errorf(api.CodeInvalidArgument, "an outbox event id is a positive number").
			WithHint("see `gpuaas ops outbox list`")
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.OutboxEvent, mutate.Effect, error) {
		e, err := change(ctx, tx, req.ID)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &e, mutate.Effect{Audit: audit.Entry{Action: action, TargetType: "outbox_event",
			TargetID: strconv.FormatInt(e.ID, 10), Detail: map[string]any{"kind": e.Kind, "subject": e.Subject,
				"attempts": e.Attempts, "last_error": e.LastError}}}, nil
	}, nil
}
