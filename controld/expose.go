package controld

import (
	"context"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/workloads"
	"github.com/gpuaas/gpuaas/internal/api"
)

// exposedAllocation is alloc.Get as p sees allocation id
// (exposures.Deps: alloc imports exposures).
func exposedAllocation(ctx context.Context, q store.Batcher, p *identity.Principal, id string) (api.Allocation, error) {
	return alloc.Get(ctx, q, alloc.ActorOf(p), id)
}

// exposedWorkload is workloads.Get as p sees workload id
// (exposures.Deps: workloads imports exposures).
func exposedWorkload(ctx context.Context, q store.Querier, p *identity.Principal, id string) (api.Workload, error) {
	return workloads.Get(ctx, q, alloc.ActorOf(p), id)
}
