package alloc

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ReasonCancelOnTimeout is the release reason of `alloc create --wait
// --cancel-on-timeout` when --timeout passed first.
const ReasonCancelOnTimeout = "cancel-on-timeout"

// createTimedOut handles `alloc create --wait` running out of --timeout:
// the request is still there (queued, or placed and provisioning) and
// would be placed and charged later. With --cancel-on-timeout it is
// released; otherwise the command says what is left behind and how to
// cancel it, as an interrupted wait does. It exits ExitWaitTimeout
// either way, unless the allocation became active meanwhile.
func createTimedOut(ctx context.Context, opts *CreateOptions, client *api.Client, created *api.Allocation) (*api.Allocation, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	a := created
	if now, err := client.AllocGet(ctx, created.ID); err == nil {
		a = now
	}
	if a.State == api.AllocActive {
		return a, nil // active in the last moment: the create succeeded
	}
	what, pending := leftBehind(a)
	if !pending {
		return nil, &cmdutil.CodedError{Code: cmdutil.ExitWaitTimeout,
			Err: fmt.Errorf("allocation %s is %s after %s (waiting for active)", a.ID, a.State, opts.Timeout)}
	}
	if !opts.CancelOnTimeout {
		fmt.Fprintf(opts.IO.ErrOut, "\nAllocation %s %s.\nCancel it with `gpuaas alloc release %s` (or give --cancel-on-timeout).\n",
			a.ID, what, a.ID)
		return nil, &cmdutil.CodedError{Code: cmdutil.ExitWaitTimeout,
			Err: fmt.Errorf("allocation %s is %s after %s (waiting for active)", a.ID, stillWhat(a), opts.Timeout)}
	}
	_, err := client.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID, Reason: ReasonCancelOnTimeout},
		api.WithIdempotencyKey(mutationKey("")))
	if err != nil {
		fmt.Fprintf(opts.IO.ErrOut, "\nAllocation %s %s, and cancelling it failed: %v.\nCancel it with `gpuaas alloc release %s`.\n",
			a.ID, what, err, a.ID)
		return nil, &cmdutil.CodedError{Code: cmdutil.ExitWaitTimeout,
			Err: fmt.Errorf("allocation %s is %s after %s; not cancelled: %w", a.ID, stillWhat(a), opts.Timeout, err)}
	}
	fmt.Fprintf(opts.IO.ErrOut, "\nAllocation %s was %s after %s: released it (--cancel-on-timeout).\n", a.ID, stillWhat(a), opts.Timeout)
	return nil, &cmdutil.CodedError{Code: cmdutil.ExitWaitTimeout,
		Err: fmt.Errorf("allocation %s was %s after %s; cancelled (--cancel-on-timeout)", a.ID, stillWhat(a), opts.Timeout)}
}

// stillWhat is the state of a pending allocation in words: "still queued"
// rather than "still requested".
func stillWhat(a *api.Allocation) string {
	if a.State == api.AllocRequested && a.Queued {
		if a.QueuePosition > 0 {
			return fmt.Sprintf("still queued (%s in line for %s)", ordinal(a.QueuePosition), a.SKU)
		}
		return "still queued for " + a.SKU
	}
	return "still " + a.State
}

// leftBehind says what became of an allocation whose create stopped
// waiting, and whether anything is left to cancel.
func leftBehind(a *api.Allocation) (string, bool) {
	switch {
	case a.State == api.AllocRequested && a.Queued:
		return "is " + stillWhat(a) + ": it stays in line and will be placed (and charged) when capacity frees", true
	case a.State == api.AllocRequested || a.State == api.AllocProvisioning || a.State == api.AllocActive:
		return fmt.Sprintf("is still %s: stopping the wait did not cancel it", a.State), true
	}
	return "", false
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
