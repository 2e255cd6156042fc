package billingapi

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/workloads"
	"github.com/gpuaas/gpuaas/internal/api"
)

// billingWorkloadUsage is `billing usage --workload [ID]`: each workload
// of the project (or the one named), newest first, with its running time,
// GPU-seconds and share of its allocation's charged windows
// (billing.WorkloadShare; docs/apps.md, "Metering"), and what its app's
// own price has been charged (billing.AppCharges; "Prices"), read in one
// snapshot. The total is the shares and the app charges. A workload that never ran used nothing.
func (h handlers) billingWorkloadUsage(ctx context.Context, r *endpoint.Request, req api.BillingUsageRequest) (*api.BillingUsageResponse, error) {
	if req.Allocation != "" || req.Volumes || req.Jobs || req.Job != "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "usage of workloads is asked for apart from an allocation's, the volumes' or the jobs'").
			WithHint("drop --alloc, --volume or --job")
	}
	out := api.BillingUsageResponse{Usage: []api.AllocationUsage{}, Workloads: []api.WorkloadUsage{}, Currency: billing.DefaultCurrency}
	var ws []api.Workload
	if req.Workload != "" {
		w, err := workloads.Get(ctx, h.DB, alloc.ActorOf(r.Principal), req.Workload)
		if err != nil {
			return nil, err
		}
		ws, out.ProjectID = []api.Workload{w}, w.ProjectID
	} else {
		p, err := Project(ctx, h.DB, r, req.Project)
		if err != nil {
			return nil, err
		}
		out.ProjectID = p.ID
		// Removed ones too: what they used was used.
		if ws, err = workloads.List(ctx, h.DB, alloc.ActorOf(r.Principal), api.AppPsRequest{Project: p.ID, All: true}); err != nil {
			return nil, err
		}
	}
	usages := map[string]*billing.Usage{}
	var apps map[string]billing.AppCharge
	err := pgx.BeginTxFunc(ctx, h.DB, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			for _, w := range ws {
				if _, seen := usages[w.AllocationID]; seen || w.StartedAt == nil {
					continue
				}
				u, metered, err := billing.AllocationWindows(ctx, tx, w.AllocationID)
				if err != nil {
					return err
				}
				if metered {
					usages[w.AllocationID] = &u
				}
			}
			ids := make([]string, len(ws))
			for i, w := range ws {
				ids[i] = w.ID
			}
			var err error
			apps, err = billing.AppCharges(ctx, tx, ids)
			return err
		})
	if err != nil {
		return nil, err
	}
	now := h.Now()
	for _, w := range ws {
		wu := api.WorkloadUsage{WorkloadID: w.ID, Name: w.Name, State: w.State, AllocationID: w.AllocationID, Image: w.Image,
			StartedAt: w.StartedAt, EndedAt: w.EndedAt, Currency: billing.DefaultCurrency}
		if u := usages[w.AllocationID]; u != nil && w.StartedAt != nil {
			wu.SKU, wu.GPUs, wu.Currency, wu.AllocationAmountMinor = u.SKU, w.GPUs, u.Currency, u.AmountMinor
			wu.Seconds, wu.GPUSeconds, wu.AmountMinor = billing.WorkloadShare(*u, w.GPUs, *w.StartedAt, w.EndedAt, now)
		}
		// An app's own price is charged apart (docs/apps.md, "Prices").
		wu.AppPricePerHourMinor = w.AppPricePerHourMinor
		if a, ok := apps[w.ID]; ok {
			wu.AppAmountMinor = a.AmountMinor
		}
		out.Workloads = append(out.Workloads, wu)
		out.TotalMinor += wu.AmountMinor + wu.AppAmountMinor
	}
	return &out, nil
}
