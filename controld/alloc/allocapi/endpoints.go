// Package allocapi serves allocations' endpoints (alloc.create, quote,
// get, list, release and top; docs/api.md). It is apart from package
// alloc because the handlers set and read an allocation's idle policy
// (controld/idle), which imports alloc
// (docs/decisions/0069-domain-endpoints.md).
package allocapi

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/idle"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
)

// DB is what the endpoints need of the database outside a mutation's
// transaction: reads in one round trip (alloc.get's batch), and
// alloc.quote's transaction that is always rolled back (a pool meets it).
type DB interface {
	store.Batcher
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Deps are what allocations' endpoints need of the server.
type Deps struct {
	DB DB
	// Rules are the checks a placement passes besides capacity (the
	// server's minimum runway, and whether top-ups are on).
	Rules func() alloc.Rules
	// Idle bounds the idle period and maximum duration a create may set
	// (docs/idle.md).
	Idle idle.Settings
	// NATS asks the allocation's node for its GPUs' telemetry (alloc.top).
	NATS *nats.Conn
	// Kick wakes the scheduler's queue loop: a release frees slots a
	// queued request may take.
	Kick func()
	Now  func() time.Time
}

// Endpoints are allocations': members rent, read and release them.
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.RefusalAudited(api.OpAllocCreate, h.create, FundsRefusal(d.DB, d.Now, "alloc.create_refused")),
		endpoint.Query(api.OpAllocGet, h.get),
		endpoint.Query(api.OpAllocList, h.list),
		endpoint.Mutation(api.OpAllocRelease, h.release),
		endpoint.Query(api.OpAllocQuote, h.quote),
		endpoint.Query(api.OpAllocTop, h.top), // endpoints_top.go
	}
}

type handlers struct{ Deps }

// checkCreate checks the request alloc.create and alloc.quote share
// and resolves its project.
func (h handlers) checkCreate(ctx context.Context, r *endpoint.Request, req api.AllocCreateRequest) (api.AllocCreateRequest, error) {
	ref, err := project.Ref(ctx, h.DB, r, req.Project)
	if err != nil {
		return req, err
	}
	req.Project = ref
	if req.GPUs <= 0 {
		return req, api.Errorf(api.CodeInvalidArgument, "gpus must be a positive number, got %d", req.GPUs)
	}
	return req, nil
}

// createPolicy reads the idle period and maximum duration of a create,
// before anything is written.
func (h handlers) createPolicy(req api.AllocCreateRequest) (idleSecs, maxSecs *int64, err error) {
	if idleSecs, err = idle.ParsePeriod("idle-release-after", req.IdleReleaseAfter, h.Idle.MinPeriod, true); err != nil {
		return nil, nil, err
	}
	if maxSecs, err = idle.ParsePeriod("max-duration", req.MaxDuration, h.Idle.MinPeriod, false); err != nil {
		return nil, nil, err
	}
	return idleSecs, maxSecs, nil
}

func (h handlers) create(ctx context.Context, r *endpoint.Request, req api.AllocCreateRequest) (endpoint.Work[api.Allocation], error) {
	req, err := h.checkCreate(ctx, r, req)
	if err != nil {
		return nil, err
	}
	idleSecs, maxSecs, err := h.createPolicy(req)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Allocation, mutate.Effect, error) {
		a, eff, err := alloc.Create(ctx, tx, alloc.ActorOf(r.Principal), req, h.Rules(), h.Now())
		if err == nil {
			err = idle.SetAllocation(ctx, tx, a.ID, idleSecs, maxSecs)
		}
		return &a, eff, err
	}, nil
}

// quote is `alloc create --dry-run`: a read, not a mutation, so it
// needs no Idempotency-Key and can leave no idempotency record behind.
func (h handlers) quote(ctx context.Context, r *endpoint.Request, req api.AllocCreateRequest) (*api.AllocQuote, error) {
	req, err := h.checkCreate(ctx, r, req)
	if err != nil {
		return nil, err
	}
	if _, _, err := h.createPolicy(req); err != nil {
		return nil, err // what the create would say
	}
	q, err := alloc.Quote(ctx, h.DB, alloc.ActorOf(r.Principal), req, h.Now())
	if err != nil {
		return nil, err
	}
	// The runway is the project's, at its total burn: what already runs
	// and this allocation, as the create's funds check sees it.
	f, err := alloc.FundsFor(ctx, h.DB, q.ProjectID, q.PricePerHourMinor, h.Rules())
	if err != nil {
		return nil, fmt.Errorf("quote funds: %w", err)
	}
	q.BalanceMinor, q.BurnPerHourMinor = &f.BalanceMinor, f.BurnMinorPerHour
	if !f.Endless {
		q.RunwaySeconds = &f.RunwaySeconds
	}
	q.MinRunwaySeconds, q.NeededMinor = int64(f.MinRunway/time.Second), f.NeededMinor
	q.InsufficientFunds = !f.Enough()
	q.TopupsOff = h.Rules().TopupsOff
	if err := alloc.CheckBudgets(ctx, h.DB, alloc.BudgetRequest{ProjectID: q.ProjectID, UserID: r.Principal.UserID,
		AddMinorPerHour: q.PricePerHourMinor, Currency: q.Currency, SKU: q.SKU, GPUs: q.GPUs}, h.Now()); err != nil {
		if api.CodeOf(err) != api.CodeBudgetExceeded {
			return nil, fmt.Errorf("quote budgets: %w", err)
		}
		q.BudgetExceeded = err.Error()
	}
	return &q, nil
}

func (h handlers) get(ctx context.Context, r *endpoint.Request, req api.AllocRef) (*api.Allocation, error) {
	// The idle policy is read in the allocation's own batch: alloc.get
	// stays one round trip (bench/README.md, "What bounds the unmet goals").
	var policy *api.AllocPolicy
	var notices []api.AllocNotice
	var vols []api.AllocVolume
	a, err := alloc.GetWithTimeline(ctx, h.DB, alloc.ActorOf(r.Principal), req.ID, func(b *pgx.Batch) {
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

func (h handlers) list(ctx context.Context, r *endpoint.Request, req api.AllocListRequest) (*api.AllocListResponse, error) {
	if req.Project == "" {
		req.Project = r.Project
	}
	as, err := alloc.List(ctx, h.DB, alloc.ActorOf(r.Principal), req)
	if err != nil {
		return nil, err
	}
	return &api.AllocListResponse{Allocations: as}, nil
}

func (h handlers) release(_ context.Context, r *endpoint.Request, req api.AllocReleaseRequest) (endpoint.Work[api.Allocation], error) {
	if err := api.CheckText("reason", req.Reason); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Allocation, mutate.Effect, error) {
		a, eff, err := alloc.Release(ctx, tx, alloc.ActorOf(r.Principal), req, h.Now())
		if err == nil && a.State == api.AllocReleased {
			h.Kick()
		}
		return &a, eff, err
	}, nil
}
