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
