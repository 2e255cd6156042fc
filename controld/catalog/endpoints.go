package catalog

import (
	"context"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Availability is what the ready nodes of a shape and GPU model can
// serve now (node.Availability). It is handed in: node imports tasks,
// whose tests import this package, so this package cannot import node.
type Availability func(ctx context.Context, q store.Querier, shape, gpuModel string) (api.SKUAvailability, error)

// Deps are what the catalog's endpoints need of the server.
type Deps struct {
	DB           store.Querier
	Availability Availability
}

// Endpoints are the catalog's (docs/decisions/0069-domain-endpoints.md):
// the SKUs on offer.
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Query(api.OpCatalogList, h.list),
	}
}

type handlers struct{ Deps }

// list is the active SKUs, each with what the ready nodes of its shape
// and GPU model can serve now (Deps.Availability).
func (h handlers) list(ctx context.Context, _ *endpoint.Request, _ api.Empty) (*api.CatalogResponse, error) {
	skus, err := List(ctx, h.DB)
	if err != nil {
		return nil, err
	}
	for i, sku := range skus {
		av, err := h.Availability(ctx, h.DB, sku.Shape, sku.GPUModel)
		if err != nil {
			return nil, err
		}
		skus[i].Availability = &av
	}
	return &api.CatalogResponse{SKUs: skus}, nil
}
