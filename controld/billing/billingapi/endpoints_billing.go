package billingapi

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/internal/api"
)

// billingBalance is a project's balance, burn rate and grace period
// (members).
func (h handlers) billingBalance(ctx context.Context, r *endpoint.Request, req api.BillingRequest) (*api.BillingBalance, error) {
	p, err := Project(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	a, err := billing.AccountOf(ctx, h.DB, p.ID, h.Settings.LowBalanceThresholdMinor)
	if err != nil {
		return nil, err
	}
	out := api.BillingBalance{ProjectID: p.ID, Project: p.Name, BalanceMinor: a.BalanceMinor, Currency: a.Currency,
		LowBalanceThresholdMinor: a.LowBalanceThresholdMinor, LowBalance: a.LowBalance, DepletedAt: a.DepletedAt,
		BurnRateMinorPerHour: a.BurnRateMinorPerHour, RunningAllocations: a.RunningMeters,
		StorageBurnMinorPerHour: a.StorageBurnMinorPerHour, RunningVolumes: a.RunningVolumes}
	if a.DepletedAt != nil {
		ends := a.DepletedAt.Add(h.Settings.Grace)
		out.GraceEndsAt = &ends
	}
	return &out, nil
}

// billingLedger is a page of a project's ledger, newest first (members).
func (h handlers) billingLedger(ctx context.Context, r *endpoint.Request, req api.BillingLedgerRequest) (*api.BillingLedgerResponse, error) {
	if req.Limit < 0 || req.Limit > 1000 || req.Before < 0 {
		return nil, api.Errorf(api.CodeInvalidArgument, "limit must be within 0..1000 and before not negative")
	}
	p, err := Project(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	es, err := billing.Entries(ctx, h.DB, p.ID, req.Before, req.Limit)
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

// billingUsage is what a project's allocations (or one allocation, or
// its volumes, jobs or workloads) used and cost.
func (h handlers) billingUsage(ctx context.Context, r *endpoint.Request, req api.BillingUsageRequest) (*api.BillingUsageResponse, error) {
	if req.Workloads || req.Workload != "" { // endpoints_usage_workloads.go
		return h.billingWorkloadUsage(ctx, r, req)
	}
	if req.Volumes {
		return h.billingVolumeUsage(ctx, r, req)
	}
	if req.Jobs || req.Job != "" {
		return h.billingJobUsage(ctx, r, req)
	}
	out := api.BillingUsageResponse{Usage: []api.AllocationUsage{}, Currency: billing.DefaultCurrency}
	var us []billing.Usage
	if req.Allocation != "" {
		a, err := alloc.Get(ctx, h.DB, alloc.ActorOf(r.Principal), req.Allocation)
		if err != nil {
			return nil, err
		}
		out.ProjectID = a.ProjectID
		// One snapshot, so that the total is what the windows add up to
		// even when an accrual commits between the two reads.
		var u billing.Usage
		var metered bool
		err = pgx.BeginTxFunc(ctx, h.DB, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
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
		p, err := Project(ctx, h.DB, r, req.Project)
		if err != nil {
			return nil, err
		}
		out.ProjectID = p.ID
		if us, err = billing.ProjectUsage(ctx, h.DB, p.ID, 1000); err != nil {
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

func (h handlers) ledgerVerify(ctx context.Context, r *endpoint.Request, _ api.Empty) (*api.LedgerVerifyResponse, error) {
	checks, err := billing.Verify(ctx, h.DB)
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
