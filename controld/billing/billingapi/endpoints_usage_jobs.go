package billingapi

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/jobs"
	"github.com/gpuaas/gpuaas/internal/api"
)

// maxJobUsage is how many of a project's latest jobs `billing usage --job`
// lists (jobs.List's own maximum).
const maxJobUsage = 500

// billingJobUsage is `billing usage --job [ID]`: what each job of the
// project (or the one named) cost, newest first — its allocation's charged
// windows over the job's running time (billing.Share; docs/jobs.md,
// "Cost"), read in one snapshot. A job that never started cost nothing.
func (h handlers) billingJobUsage(ctx context.Context, r *endpoint.Request, req api.BillingUsageRequest) (*api.BillingUsageResponse, error) {
	switch {
	case req.Allocation != "" || req.Volumes:
		return nil, api.Errorf(api.CodeInvalidArgument, "usage of jobs is asked for apart from an allocation's or the volumes'").
			WithHint("drop --alloc or --volume")
	}
	out := api.BillingUsageResponse{Usage: []api.AllocationUsage{}, Jobs: []api.JobUsage{}, Currency: billing.DefaultCurrency}
	var js []api.Job
	var err error
	if req.Job != "" {
		var j api.Job
		if j, err = jobs.Get(ctx, h.DB, alloc.ActorOf(r.Principal), req.Job); err != nil {
			return nil, err
		}
		js, out.ProjectID = []api.Job{j}, j.ProjectID
	} else {
		p, err := Project(ctx, h.DB, r, req.Project)
		if err != nil {
			return nil, err
		}
		out.ProjectID = p.ID
		if js, err = jobs.List(ctx, h.DB, alloc.ActorOf(r.Principal), api.JobListRequest{Project: p.ID, Limit: maxJobUsage}); err != nil {
			return nil, err
		}
	}
	usages := map[string]*billing.Usage{}
	err = pgx.BeginTxFunc(ctx, h.DB, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			for _, j := range js {
				if _, seen := usages[j.AllocationID]; seen || j.StartedAt == nil {
					continue
				}
				u, metered, err := billing.AllocationWindows(ctx, tx, j.AllocationID)
				if err != nil {
					return err
				}
				if metered {
					usages[j.AllocationID] = &u
				}
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	now := h.Now()
	for _, j := range js {
		ju := api.JobUsage{JobID: j.ID, Name: j.Name, State: j.State, AllocationID: j.AllocationID, StartedAt: j.StartedAt,
			EndedAt: j.EndedAt, Currency: billing.DefaultCurrency}
		if u := usages[j.AllocationID]; u != nil && j.StartedAt != nil {
			end := now
			if j.EndedAt != nil {
				end = *j.EndedAt
			}
			ju.SKU, ju.GPUs, ju.Currency, ju.AllocationAmountMinor = u.SKU, u.GPUs, u.Currency, u.AmountMinor
			ju.Seconds, ju.AmountMinor = billing.Share(u.Windows, *j.StartedAt, end)
		}
		out.Jobs = append(out.Jobs, ju)
		out.TotalMinor += ju.AmountMinor
	}
	return &out, nil
}
