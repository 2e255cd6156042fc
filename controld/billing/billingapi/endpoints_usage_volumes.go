package billingapi

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Default and maximum of BillingUsageRequest.Windows.
const (
	defaultVolumeUsageWindows = 60
	maxVolumeUsageWindows     = 10000
)

// billingVolumeUsage is `billing usage --volume`: each volume of the
// project with its GiB-hours and cost, and its latest windows, read in one
// snapshot (the totals are what the windows add up to at that moment).
func (h handlers) billingVolumeUsage(ctx context.Context, r *endpoint.Request, req api.BillingUsageRequest) (*api.BillingUsageResponse, error) {
	switch {
	case req.Allocation != "":
		return nil, api.Errorf(api.CodeInvalidArgument, "usage of volumes and of an allocation are asked for separately").
			WithHint("drop --alloc or --volume")
	case req.Windows < 0 || req.Windows > maxVolumeUsageWindows:
		return nil, api.Errorf(api.CodeInvalidArgument, "windows must be within 0..%d", maxVolumeUsageWindows)
	case req.Windows == 0:
		req.Windows = defaultVolumeUsageWindows
	}
	p, err := Project(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	out := api.BillingUsageResponse{ProjectID: p.ID, Usage: []api.AllocationUsage{}, Volumes: []api.VolumeUsage{},
		Currency: billing.DefaultCurrency}
	var us []billing.VolumeUsage
	names := map[string]string{}
	err = pgx.BeginTxFunc(ctx, h.DB, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			if us, err = billing.VolumeUsages(ctx, tx, p.ID, req.Windows); err != nil {
				return err
			}
			vs, err := volumes.List(ctx, tx, p.ID, true)
			for _, v := range vs {
				names[v.ID] = v.Name
			}
			return err
		})
	if err != nil {
		return nil, err
	}
	for _, u := range us {
		w := api.VolumeUsage{VolumeID: u.VolumeID, Name: names[u.VolumeID], SizeBytes: u.SizeBytes,
			PricePerGiBMonthMinor: u.PricePerGiBMonthMinor, Currency: u.Currency, StartedAt: u.StartedAt,
			StoppedAt: u.StoppedAt, Running: u.Running, Seconds: u.Seconds, GiBHours: u.GiBHours, AmountMinor: u.AmountMinor}
		for _, win := range u.Windows {
			w.Windows = append(w.Windows, api.VolumeUsageWindow{Start: win.Start, End: win.End, Seconds: win.Seconds,
				SizeBytes: win.SizeBytes, GiBHours: win.GiBHours, AmountMinor: win.AmountMinor})
		}
		out.Volumes = append(out.Volumes, w)
		out.TotalMinor += u.AmountMinor
	}
	return &out, nil
}
