package controld

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
)

// allocEndpoints are allocations (controld/alloc).
func (s *Server) allocEndpoints() []endpointDef {
	return []endpointDef{
		s.mutation(api.EndpointAllocCreate, loggedIn, s.allocCreate),
		s.query(api.EndpointAllocGet, loggedIn, s.allocGet),
		s.query(api.EndpointAllocList, loggedIn, s.allocList),
		s.mutation(api.EndpointAllocRelease, loggedIn, s.allocRelease),
		s.query(api.EndpointAllocQuote, loggedIn, s.allocQuote),
	}
}

// decodeAllocCreate reads and checks the request alloc.create and
// alloc.quote share.
func (s *Server) decodeAllocCreate(ctx context.Context, c *call) (api.AllocCreateRequest, error) {
	var req api.AllocCreateRequest
	if err := c.decode(&req); err != nil {
		return req, err
	}
	ref, err := s.projectRef(ctx, c, req.Project)
	if err != nil {
		return req, err
	}
	req.Project = ref
	if req.GPUs <= 0 {
		return req, api.Errorf(api.CodeInvalidArgument, "gpus must be a positive number, got %d", req.GPUs)
	}
	return req, nil
}

func (s *Server) allocCreate(ctx context.Context, c *call) (mutate.Func, error) {
	req, err := s.decodeAllocCreate(ctx, c)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		return alloc.Create(ctx, tx, c.actor(), req, s.now())
	}, nil
}

// allocQuote is `alloc create --dry-run`: a read, not a mutation, so it
// needs no Idempotency-Key and can leave no idempotency record behind.
func (s *Server) allocQuote(ctx context.Context, c *call) (any, error) {
	req, err := s.decodeAllocCreate(ctx, c)
	if err != nil {
		return nil, err
	}
	q, err := alloc.Quote(ctx, s.pool, c.actor(), req, s.now())
	if err != nil {
		return nil, err
	}
	balance, err := billing.Balance(ctx, s.pool, q.ProjectID)
	if err != nil {
		return nil, fmt.Errorf("quote balance: %w", err)
	}
	q.BalanceMinor = &balance
	if runway, ok := alloc.Runway(balance, q.PricePerHourMinor); ok {
		q.RunwaySeconds = &runway
	}
	return q, nil
}

func (s *Server) allocGet(ctx context.Context, c *call) (any, error) {
	var req api.AllocRef
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	a, err := alloc.Get(ctx, s.pool, c.actor(), req.ID)
	if err != nil {
		return nil, err
	}
	a.Timeline, err = tasks.Timeline(ctx, s.pool, a.ID)
	return a, err
}

func (s *Server) allocList(ctx context.Context, c *call) (any, error) {
	var req api.AllocListRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.Project == "" {
		req.Project = c.project
	}
	as, err := alloc.List(ctx, s.pool, c.actor(), req)
	if err != nil {
		return nil, err
	}
	return api.AllocListResponse{Allocations: as}, nil
}

func (s *Server) allocRelease(_ context.Context, c *call) (mutate.Func, error) {
	var req api.AllocReleaseRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		a, eff, err := alloc.Release(ctx, tx, c.actor(), req, s.now())
		if err == nil && a.State == api.AllocReleased {
			s.kickQueue()
		}
		return a, eff, err
	}, nil
}
