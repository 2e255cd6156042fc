package controld

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/idle"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
)

// allocEndpoints are allocations (controld/alloc).
func (s *Server) allocEndpoints() []endpointDef {
	return []endpointDef{
		refusalAuditedMutation(s, api.OpAllocCreate, s.allocCreate, s.auditFundsRefusal("alloc.create_refused")),
		query(s, api.OpAllocGet, s.allocGet),
		query(s, api.OpAllocList, s.allocList),
		mutation(s, api.OpAllocRelease, s.allocRelease),
		query(s, api.OpAllocQuote, s.allocQuote),
		query(s, api.OpAllocTop, s.allocTop), // handlers_alloctop.go
	}
}

// checkAllocCreate checks the request alloc.create and alloc.quote share
// and resolves its project.
func (s *Server) checkAllocCreate(ctx context.Context, c *call, req api.AllocCreateRequest) (api.AllocCreateRequest, error) {
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

func (s *Server) allocCreate(ctx context.Context, c *call, req api.AllocCreateRequest) (work[api.Allocation], error) {
	req, err := s.checkAllocCreate(ctx, c, req)
	if err != nil {
		return nil, err
	}
	idleSecs, maxSecs, err := s.allocCreatePolicy(req)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Allocation, mutate.Effect, error) {
		a, eff, err := alloc.Create(ctx, tx, c.actor(), req, s.allocRules(), s.now())
		if err == nil {
			err = idle.SetAllocation(ctx, tx, a.ID, idleSecs, maxSecs)
		}
		return &a, eff, err
	}, nil
}

// auditFundsRefusal records a create refused for insufficient funds or
// over a budget, as action (alloc.create_refused, volume.create_refused),
// in a write of its own (the create's transaction was rolled back): who
// tried to rent what, and the balance and burn that fell short.
func (s *Server) auditFundsRefusal(action string) func(ctx context.Context, c *call, err error) {
	refused := s.fundsRefusal(action)
	return func(ctx context.Context, c *call, err error) { refused(ctx, c.request(), err) }
}

// fundsRefusal is auditFundsRefusal as a domain's endpoints take it
// (endpoint.RefusalAudited).
func (s *Server) fundsRefusal(action string) endpoint.Refusal {
	return func(ctx context.Context, r *endpoint.Request, err error) {
		var funds *alloc.InsufficientFundsError
		var over *alloc.BudgetExceededError
		var entry audit.Entry
		switch {
		case errors.As(err, &funds):
			entry = audit.Entry{Action: action, TargetType: "project", TargetID: funds.Funds.ProjectID,
				ProjectID: funds.Funds.ProjectID, Detail: funds.AuditDetail()}
		case errors.As(err, &over):
			entry = audit.Entry{Action: action, TargetType: "project", TargetID: over.Req.ProjectID,
				ProjectID: over.Req.ProjectID, Detail: over.AuditDetail()}
		default:
			return
		}
		meta := audit.Meta{At: s.now(), ActorID: r.Principal.UserID, CorrelationID: r.Corr,
			IdempotencyKey: r.IdempotencyKey}
		if werr := audit.Write(context.WithoutCancel(ctx), s.pool, meta, entry); werr != nil {
			r.Log.Warn("audit refused create", "action", action, "err", werr)
		}
	}
}

// allocQuote is `alloc create --dry-run`: a read, not a mutation, so it
// needs no Idempotency-Key and can leave no idempotency record behind.
func (s *Server) allocQuote(ctx context.Context, c *call, req api.AllocCreateRequest) (*api.AllocQuote, error) {
	req, err := s.checkAllocCreate(ctx, c, req)
	if err != nil {
		return nil, err
	}
	if _, _, err := s.allocCreatePolicy(req); err != nil {
		return nil, err // what the create would say
	}
	q, err := alloc.Quote(ctx, s.pool, c.actor(), req, s.now())
	if err != nil {
		return nil, err
	}
	// The runway is the project's, at its total burn: what already runs
	// and this allocation, as the create's funds check sees it.
	f, err := alloc.FundsFor(ctx, s.pool, q.ProjectID, q.PricePerHourMinor, s.allocRules())
	if err != nil {
		return nil, fmt.Errorf("quote funds: %w", err)
	}
	q.BalanceMinor, q.BurnPerHourMinor = &f.BalanceMinor, f.BurnMinorPerHour
	if !f.Endless {
		q.RunwaySeconds = &f.RunwaySeconds
	}
	q.MinRunwaySeconds, q.NeededMinor = int64(f.MinRunway/time.Second), f.NeededMinor
	q.InsufficientFunds = !f.Enough()
	q.TopupsOff = s.allocRules().TopupsOff
	if err := alloc.CheckBudgets(ctx, s.pool, alloc.BudgetRequest{ProjectID: q.ProjectID, UserID: c.principal.UserID,
		AddMinorPerHour: q.PricePerHourMinor, Currency: q.Currency, SKU: q.SKU, GPUs: q.GPUs}, s.now()); err != nil {
		if api.CodeOf(err) != api.CodeBudgetExceeded {
			return nil, fmt.Errorf("quote budgets: %w", err)
		}
		q.BudgetExceeded = err.Error()
	}
	return &q, nil
}

func (s *Server) allocGet(ctx context.Context, c *call, req api.AllocRef) (*api.Allocation, error) {
	// The idle policy is read in the allocation's own batch: alloc.get
	// stays one round trip (bench/README.md, "What bounds the unmet goals").
	var policy *api.AllocPolicy
	var notices []api.AllocNotice
	var vols []api.AllocVolume
	a, err := alloc.GetWithTimeline(ctx, s.pool, c.actor(), req.ID, func(b *pgx.Batch) {
		idle.QueuePolicy(b, &policy, req.ID)
		outbox.QueueNotices(b, &notices, req.ID)
		volumes.QueueOfAllocation(b, &vols, req.ID)
	})
	if err != nil {
		return nil, err
	}
	a.Policy, a.Notices, a.Volumes = policy, notices, vols
	return &a, nil
}

func (s *Server) allocList(ctx context.Context, c *call, req api.AllocListRequest) (*api.AllocListResponse, error) {
	if req.Project == "" {
		req.Project = c.project
	}
	as, err := alloc.List(ctx, s.pool, c.actor(), req)
	if err != nil {
		return nil, err
	}
	return &api.AllocListResponse{Allocations: as}, nil
}

func (s *Server) allocRelease(_ context.Context, c *call, req api.AllocReleaseRequest) (work[api.Allocation], error) {
	if err := api.CheckText("reason", req.Reason); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Allocation, mutate.Effect, error) {
		a, eff, err := alloc.Release(ctx, tx, c.actor(), req, s.now())
		if err == nil && a.State == api.AllocReleased {
			s.kickQueue()
		}
		return &a, eff, err
	}, nil
}
