package controld

import (
	"context"

	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/internal/api"
)

// catalogEndpoints are the SKUs on offer (controld/catalog).
func (s *Server) catalogEndpoints() []endpointDef {
	return []endpointDef{
		query(s, api.OpCatalogList, s.catalogList),
	}
}

func (s *Server) catalogList(ctx context.Context, _ *call, _ api.Empty) (*api.CatalogResponse, error) {
	skus, err := catalog.List(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	for i, sku := range skus {
		av, err := node.Availability(ctx, s.pool, sku.Shape, sku.GPUModel)
		if err != nil {
			return nil, err
		}
		skus[i].Availability = &av
	}
	return &api.CatalogResponse{SKUs: skus}, nil
}
