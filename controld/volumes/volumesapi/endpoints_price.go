package volumesapi

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
)

// adminVolumePriceSet is admin.volume_price_set (`gpuaas admin
// volume-price set`, docs/volumes.md "Billing"): an admin sets what a GiB
// of volume costs a month. Volumes are charged in the platform's one
// currency, so a price in another would never be used and is refused.
// Audited with the price before and after, and a volume.price event, also
// when the price does not change (the same request twice leaves one
// price); volume.quote (`volume create --dry-run`) shows the new price at
// once, and meters started from now on charge it.
func (h handlers) adminVolumePriceSet(_ context.Context, _ *endpoint.Request, req api.VolumePriceSetRequest) (endpoint.Work[api.VolumePrice], error) {
	currency := strings.ToLower(strings.TrimSpace(req.Currency))
	if currency == "" {
		currency = billing.DefaultCurrency
	}
	if currency != billing.DefaultCurrency {
		return nil, api.Errorf(api.CodeInvalidArgument, "volumes are charged in %s: a price in %q would never be used", billing.DefaultCurrency, req.Currency).
			WithHint("give the price in " + billing.DefaultCurrency + " (--currency " + billing.DefaultCurrency + ")")
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.VolumePrice, mutate.Effect, error) {
		p, err := catalog.ChangeVolumePrice(ctx, tx, currency, req.PricePerGiBMonthMinor, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &p, mutate.Effect{
			Audit: audit.Entry{Action: api.EndpointAdminVolumePriceSet, TargetType: "volume_price", TargetID: currency,
				Detail: map[string]any{"currency": currency, "price_per_gib_month_minor": p.PricePerGiBMonthMinor,
					"previous_minor": p.PreviousMinor, "changed": p.Changed}},
			Events: []outbox.Event{{Kind: api.EventVolumePrice, Subject: currency, Payload: p}},
		}, nil
	}, nil
}
