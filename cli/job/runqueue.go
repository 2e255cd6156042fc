package job

import (
	"context"
	"fmt"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ordinal is 1st, 2nd, 3rd, 4th, ...
func ordinal(n int) string { return cmdutil.Ordinal(n) }

// runQueuedDetached is `run --queue --detach`: the allocation request
// (waiting in line when nothing fits now) and a job queued on it, then
// back at once; controld starts the job when the allocation is active
// (docs/jobs.md "Waiting for capacity"). A job that cannot be created
// gives its allocation back.
func runQueuedDetached(ctx context.Context, ios *cmdutil.IOStreams, client *api.Client, req api.JobCreateRequest,
	sku api.AllocCreateRequest, key string) error {
	a, err := request(ctx, ios, client, sku, key)
	if err != nil {
		return err
	}
	req.AllocationID, req.Queue = a.ID, true
	j, err := client.JobCreate(ctx, req, api.WithIdempotencyKey(key))
	if err != nil {
		if _, rerr := client.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID}); rerr == nil {
			fmt.Fprintf(ios.ErrOut, "allocation %s released: the job could not be created\n", a.ID)
		}
		return err
	}
	fmt.Fprintf(ios.ErrOut, "job %s %s on allocation %s; `gpuaas job wait %s` follows it\n", j.ID, jobState(j, a.SKU), a.ID, j.ID)
	_, err = fmt.Fprintln(ios.Out, j.ID)
	return err
}

// jobState is a job's state with, while it is queued, its place in line
// ("queued, 2nd in line for h100-baremetal"; sku may be empty).
func jobState(j *api.Job, sku string) string {
	if j.State != api.JobQueued {
		return j.State
	}
	if j.QueuePosition == 0 {
		return "queued (its allocation is placed and provisioning)"
	}
	s := fmt.Sprintf("queued, %s in line", ordinal(j.QueuePosition))
	if sku != "" {
		s += " for " + sku
	}
	return s
}
