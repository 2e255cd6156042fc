package controld

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/apps"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
)

// appPriceEndpoints are apps' own prices per hour (docs/apps.md,
// "Prices"; docs/decisions/0059-app-prices.md).
func (s *Server) appPriceEndpoints() []endpointDef {
	return []endpointDef{
		mutation(s, api.OpAdminAppPriceSet, s.adminAppPriceSet),
		query(s, api.OpAdminAppPriceList, s.adminAppPriceList),
	}
}

// adminAppPriceSet is admin.app_price_set (`gpuaas admin app-price set
// NAME PRICE`): an operator sets what a platform app costs an hour on top
// of its allocation. Charged in the platform's one currency, as volumes
// are (a price in another is refused); audited with the price before and
// after, and an app.price event, also when the price does not change.
// Workloads run from now on are charged it; running ones keep theirs.
func (s *Server) adminAppPriceSet(ctx context.Context, c *call, req api.AppPriceSetRequest) (work[api.AppPrice], error) {
	currency := strings.ToLower(strings.TrimSpace(req.Currency))
	if currency == "" {
		currency = billing.DefaultCurrency
	}
	if currency != billing.DefaultCurrency {
		return nil, api.Errorf(api.CodeInvalidArgument, "apps are charged in %s: a price in %q would never be used", billing.DefaultCurrency, req.Currency).
			WithHint("give the price in " + billing.DefaultCurrency + " (--currency " + billing.DefaultCurrency + ")")
	}
	ref := strings.TrimSpace(req.App)
	if ref == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "app: which app? give a platform app's name or id")
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.AppPrice, mutate.Effect, error) {
		p, err := apps.SetPrice(ctx, tx, ref, currency, req.PricePerHourMinor, s.now())
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

// adminAppPriceList is admin.app_price_list (`gpuaas admin app-price
// list`): every platform app, whatever its lifecycle, with its price.
func (s *Server) adminAppPriceList(ctx context.Context, _ *call, _ api.AppPriceListRequest) (*api.AppPriceList, error) {
	ps, err := apps.Prices(ctx, s.pool, billing.DefaultCurrency)
	if err != nil {
		return nil, err
	}
	return &api.AppPriceList{Prices: ps}, nil
}
