package apps

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
)

// priceSet is admin.app_price_set (`gpuaas admin app-price set NAME
// PRICE`): an operator sets what a platform app costs an hour on top of
// its allocation. Charged in the platform's one currency (Deps.Currency),
// as volumes are (a price in another is refused); audited with the price
// before and after, and an app.price event, also when the price does not
// change. Workloads run from now on are charged it; running ones keep
// theirs.
func (h handlers) priceSet(_ context.Context, _ *endpoint.Request, req api.AppPriceSetRequest) (endpoint.Work[api.AppPrice], error) {
	currency := strings.ToLower(strings.TrimSpace(req.Currency))
	if currency == "" {
		currency = h.Currency
	}
	if currency != h.Currency {
		return nil, api.Errorf(api.CodeInvalidArgument, "apps are charged in %s: a price in %q would never be used", h.Currency, req.Currency).
			WithHint("give the price in " + h.Currency + " (--currency " + h.Currency + ")")
	}
	ref := strings.TrimSpace(req.App)
	if ref == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "app: which app? give a platform app's name or id")
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.AppPrice, mutate.Effect, error) {
		p, err := SetPrice(ctx, tx, ref, currency, req.PricePerHourMinor, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &p, mutate.Effect{
			Audit: audit.Entry{Action: api.EndpointAdminAppPriceSet, TargetType: "app", TargetID: p.AppID,
				Detail: map[string]any{"app": p.App, "currency": currency, "price_per_hour_minor": p.PricePerHourMinor,
					"previous_minor": p.PreviousMinor, "changed": p.Changed}},
			Events: []outbox.Event{{Kind: api.EventAppPrice, Subject: p.AppID, Payload: p}},
		}, nil
	}, nil
}

// priceList is admin.app_price_list (`gpuaas admin app-price list`):
// every platform app, whatever its lifecycle, with its price.
func (h handlers) priceList(ctx context.Context, _ *endpoint.Request, _ api.AppPriceListRequest) (*api.AppPriceList, error) {
	ps, err := Prices(ctx, h.DB, h.Currency)
	if err != nil {
		return nil, err
	}
	return &api.AppPriceList{Prices: ps}, nil
}
