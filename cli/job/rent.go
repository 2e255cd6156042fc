package job

import (
	"context"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// rent rents the allocation a job.yaml's resources.sku asks for and waits
// until it is active (cmdutil.Rent, shared with `app run --sku`): its
// price first, then alloc.create with a key derived from the run's. With
// req.Queue, a request that cannot be placed now waits in line, and the
// wait prints its place whenever it changes. An allocation that fails
// ends the run with ExitAllocFailed; a wait that is interrupted (Ctrl-C)
// releases the allocation, since no job was started on it.
func rent(ctx context.Context, ios *cmdutil.IOStreams, client *api.Client, req api.AllocCreateRequest, key string) (string, error) {
	return cmdutil.Rent(ctx, ios, client, req, key, "job")
}

// request prints the price of the allocation a job.yaml's resources.sku
// asks for and creates it (cmdutil.RentRequest).
func request(ctx context.Context, ios *cmdutil.IOStreams, client *api.Client, req api.AllocCreateRequest, key string) (*api.Allocation, error) {
	return cmdutil.RentRequest(ctx, ios, client, req, key)
}
