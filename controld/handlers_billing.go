package controld

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
)

// billingEndpoints are the billing reads and the ledger check. (Top-ups,
// refunds and credits are the payments endpoints.)
func (s *Server) billingEndpoints() []endpointDef {
	return []endpointDef{
		query(s, api.OpBillingBalance, s.billingBalance),
		query(s, api.OpBillingLedger, s.billingLedger),
		query(s, api.OpBillingUsage, s.billingUsage),
		query(s, api.OpOpsLedgerVerify, s.ledgerVerify),
	}
}

func (s *Server) newBillingRunner() (*billing.Runner, error) {
	return billing.NewRunner(billing.Config{Settings: s.cfg.Billing, Pool: s.pool, Release: s.releaseDepleted,
		ReleaseBudget: s.releaseOverBudget, Now: s.cfg.Now, Log: s.cfg.Log.With("loop", "billing")})
}

// BillingTick runs one billing tick now (for tests and `gpuaas dev`).
func (s *Server) BillingTick(ctx context.Context) (billing.TickResult, error) {
	return s.billing.Tick(ctx)
}

// errCauseGone stops a platformRelease: what made the platform release
// the allocations no longer holds (the account was topped up, the budget
// raised or cleared).
var errCauseGone = errors.New("the cause of the release no longer holds")

// platformRelease is the platform releasing allocations for one cause.
type platformRelease struct {
	key         string // idempotency key prefix; the allocation id follows
	fingerprint string // fingerprint prefix; the allocation id follows
	reason      string // the transition's reason
	auditAction string
	what        string // names the release in logs
	// stillDue re-checks the cause in each release's transaction.
	stillDue func(ctx context.Context, tx pgx.Tx) (bool, error)
}

// releaseAll releases ids for r, each through alloc.Release (the state
// machine's release path, as an operator would; actor system:billing) in
// a mutation of its own: audit row, alloc.state events to the project's
// members, idempotency. Each release re-checks the cause in its
// transaction, so a change that lands meanwhile stops the rest. An
// allocation changed meanwhile (released by its user, say) is skipped.
func (s *Server) releaseAll(ctx context.Context, ids []string, r platformRelease) (int, error) {
	actor := alloc.Actor{UserID: billing.SystemActor, Role: api.RoleOperator}
	released := 0
	for _, id := range ids {
		_, err := s.mut.Run(ctx, mutate.Request{Endpoint: api.EndpointAllocRelease, ActorID: billing.SystemActor,
			Key: r.key + id, Fingerprint: []byte(r.fingerprint + id)},
			func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
				due, err := r.stillDue(ctx, tx)
				if err != nil {
					return nil, mutate.Effect{}, err
				}
				if !due {
					return nil, mutate.Effect{}, errCauseGone
				}
				a, eff, err := alloc.Release(ctx, tx, actor, api.AllocReleaseRequest{ID: id, Reason: r.reason}, s.now())
				if err != nil {
					return nil, eff, err
				}
				eff.Audit.Action = r.auditAction
				return a, eff, nil
			})
		switch {
		case errors.Is(err, errCauseGone):
			return released, nil
		case errors.Is(err, api.ErrConflict), errors.Is(err, api.ErrIdempotencyMismatch):
			s.cfg.Log.Info(r.what+" skipped", "allocation", id, "err", err)
		case err != nil:
			return released, fmt.Errorf("release %s: %w", id, err)
		default:
			released++
		}
	}
	if released > 0 {
		s.kickQueue()
	}
	return released, nil
}

// releaseDepleted releases every open allocation of a project whose
// balance ran out more than the grace period ago (releaseAll); a top-up
// that lands meanwhile stops the rest.
func (s *Server) releaseDepleted(ctx context.Context, projectID string) (int, error) {
	open, err := alloc.OpenInProject(ctx, s.pool, projectID)
	if err != nil {
		return 0, err
	}
	return s.releaseAll(ctx, open, platformRelease{key: "billing.depleted:", fingerprint: projectID + "\n",
		reason: "the project's balance ran out and its grace period ended", auditAction: "billing.depleted_release",
		what: "depleted release",
		stillDue: func(ctx context.Context, tx pgx.Tx) (bool, error) {
			return billing.StillDepleted(ctx, tx, projectID, s.cfg.Billing.Grace, s.now())
		}})
}

// billingProject resolves the project of a billing read and checks that
// the caller may read it.
func (s *Server) billingProject(ctx context.Context, c *call, ref string) (api.Project, error) {
	ref, err := s.projectRef(ctx, c, ref)
	if err != nil {
		return api.Project{}, err
	}
	return project.Authorize(ctx, s.pool, ref, c.principal.UserID, c.principal.Role, project.AccessRead)
}

func (s *Server) billingBalance(ctx context.Context, c *call, req api.BillingRequest) (*api.BillingBalance, error) {
	p, err := s.billingProject(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	a, err := billing.AccountOf(ctx, s.pool, p.ID, s.cfg.Billing.LowBalanceThresholdMinor)
	if err != nil {
		return nil, err
	}
	out := api.BillingBalance{ProjectID: p.ID, Project: p.Name, BalanceMinor: a.BalanceMinor, Currency: a.Currency,
		LowBalanceThresholdMinor: a.LowBalanceThresholdMinor, LowBalance: a.LowBalance, DepletedAt: a.DepletedAt,
		BurnRateMinorPerHour: a.BurnRateMinorPerHour, RunningAllocations: a.RunningMeters,
		StorageBurnMinorPerHour: a.StorageBurnMinorPerHour, RunningVolumes: a.RunningVolumes}
	if a.DepletedAt != nil {
		ends := a.DepletedAt.Add(s.cfg.Billing.Grace)
		out.GraceEndsAt = &ends
	}
	return &out, nil
}

func (s *Server) billingLedger(ctx context.Context, c *call, req api.BillingLedgerRequest) (*api.BillingLedgerResponse, error) {
	if req.Limit < 0 || req.Limit > 1000 || req.Before < 0 {
		return nil, api.Errorf(api.CodeInvalidArgument, "limit must be within 0..1000 and before not negative")
	}
	p, err := s.billingProject(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	es, err := billing.Entries(ctx, s.pool, p.ID, req.Before, req.Limit)
	if err != nil {
		return nil, err
	}
	out := api.BillingLedgerResponse{ProjectID: p.ID, Entries: make([]api.LedgerEntry, len(es))}
	for i, e := range es {
		out.Entries[i] = api.LedgerEntry{ID: e.ID, ProjectID: e.ProjectID, Kind: string(e.Kind), Reference: e.Reference,
			AmountMinor: e.AmountMinor, Currency: e.Currency, Memo: e.Memo, ActorID: e.ActorID, CreatedAt: e.CreatedAt,
			PrevHash: e.PrevHash, Hash: e.Hash}
	}
	return &out, nil
}

func (s *Server) billingUsage(ctx context.Context, c *call, req api.BillingUsageRequest) (*api.BillingUsageResponse, error) {
	if req.Workloads || req.Workload != "" { // handlers_billing_workloads.go
		return s.billingWorkloadUsage(ctx, c, req)
	}
	if req.Volumes {
		return s.billingVolumeUsage(ctx, c, req)
	}
	if req.Jobs || req.Job != "" {
		return s.billingJobUsage(ctx, c, req)
	}
	out := api.BillingUsageResponse{Usage: []api.AllocationUsage{}, Currency: billing.DefaultCurrency}
	var us []billing.Usage
	if req.Allocation != "" {
		a, err := alloc.Get(ctx, s.pool, c.actor(), req.Allocation)
		if err != nil {
			return nil, err
		}
		out.ProjectID = a.ProjectID
		// One snapshot, so that the total is what the windows add up to
		// even when an accrual commits between the two reads.
		var u billing.Usage
		var metered bool
		err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
			func(tx pgx.Tx) error {
				u, metered, err = billing.AllocationWindows(ctx, tx, a.ID)
				return err
			})
		if err != nil {
			return nil, err
		}
		if metered {
			us = []billing.Usage{u}
		}
	} else {
		p, err := s.billingProject(ctx, c, req.Project)
		if err != nil {
			return nil, err
		}
		out.ProjectID = p.ID
		if us, err = billing.ProjectUsage(ctx, s.pool, p.ID, 1000); err != nil {
			return nil, err
		}
	}
	for _, u := range us {
		w := api.AllocationUsage{AllocationID: u.AllocationID, SKU: u.SKU, GPUs: u.GPUs,
			PricePerGPUHourMinor: u.PricePerGPUHourMinor, Currency: u.Currency, StartedAt: u.StartedAt,
			StoppedAt: u.StoppedAt, Seconds: u.Seconds, AmountMinor: u.AmountMinor}
		for _, win := range u.Windows {
			w.Windows = append(w.Windows, api.UsageWindow{Start: win.Start, End: win.End, Seconds: win.Seconds,
				AmountMinor: win.AmountMinor})
		}
		out.Usage = append(out.Usage, w)
		out.TotalMinor += u.AmountMinor
	}
	return &out, nil
}

func (s *Server) ledgerVerify(ctx context.Context, _ *call, _ api.Empty) (*api.LedgerVerifyResponse, error) {
	checks, err := billing.Verify(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	out := api.LedgerVerifyResponse{OK: true, Accounts: make([]api.LedgerAccountCheck, len(checks))}
	for i, c := range checks {
		out.Accounts[i] = api.LedgerAccountCheck{ProjectID: c.ProjectID, Entries: c.Entries, BalanceMinor: c.BalanceMinor,
			CachedBalanceMinor: c.CachedBalanceMinor, OK: c.OK(), Problems: c.Problems}
		out.OK = out.OK && c.OK()
	}
	return &out, nil
}

// releaseOverBudget releases the running allocations of a budget's scope
// whose spend reached the cap with action release (releaseAll, reason
// "budget"); raising or clearing the budget meanwhile stops the rest.
func (s *Server) releaseOverBudget(ctx context.Context, projectID, userID string) (int, error) {
	running, err := billing.RunningInScope(ctx, s.pool, projectID, userID)
	if err != nil {
		return 0, err
	}
	return s.releaseAll(ctx, running, platformRelease{key: "billing.budget:", fingerprint: projectID + "\n" + userID + "\n",
		reason: "budget", auditAction: "billing.budget_release", what: "budget release",
		stillDue: func(ctx context.Context, tx pgx.Tx) (bool, error) {
			return billing.StillOverBudget(ctx, tx, projectID, userID, s.now())
		}})
}
