package job

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// waitState is how rent shows an allocation it waits for: its state, and
// for a request waiting in line (alloc create --queue, docs/jobs.md
// "Waiting for capacity") its place there, so a change of place is
// printed as a change of state.
func waitState(a *api.Allocation) string {
	if a.State != api.AllocRequested || !a.Queued {
		return a.State
	}
	if a.QueuePosition > 0 {
		return fmt.Sprintf("queued for capacity, %s in line for %s", ordinal(a.QueuePosition), a.SKU)
	}
	return "queued for capacity for " + a.SKU
}

// giveBack releases an allocation rented for a job whose wait was
// interrupted before the job started: a queued request leaves the line
// before it is placed (nothing is charged), a placed one is released. The
// release runs on a context of its own, the run's being cancelled; what
// could not be done is said, with the command that does it.
func giveBack(ctx context.Context, ios *cmdutil.IOStreams, client *api.Client, id string) {
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := client.AllocRelease(relCtx, api.AllocReleaseRequest{ID: id}); err != nil {
		fmt.Fprintf(ios.ErrOut, "\nallocation %s was not released (%v): `gpuaas alloc release %s` does it\n", id, err, id)
		return
	}
	fmt.Fprintf(ios.ErrOut, "\nallocation %s released: interrupted before the job started\n", id)
}

// ordinal is 1st, 2nd, 3rd, 4th, ...
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

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
