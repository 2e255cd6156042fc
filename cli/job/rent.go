package job

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// rent rents the allocation a job.yaml's resources.sku asks for: its
// price first (alloc.quote: an unknown SKU or too little money is refused
// before anything is created), then alloc.create with a key derived from
// the run's (a retry of the run reuses it), then a wait until it is
// active. With req.Queue, a request that cannot be placed now waits in
// line, and the wait prints its place whenever it changes (runqueue.go).
// An allocation that fails ends the run with ExitAllocFailed; a wait
// that is interrupted (Ctrl-C) releases the allocation, since no job was
// started on it (giveBack).
func rent(ctx context.Context, ios *cmdutil.IOStreams, client *api.Client, req api.AllocCreateRequest, key string) (string, error) {
	a, err := request(ctx, ios, client, req, key)
	if err != nil {
		return "", err
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	shown := ""
	for {
		if s := waitState(a); s != shown {
			fmt.Fprintf(ios.ErrOut, "allocation %s: %s\n", a.ID, s)
			shown = s
		}
		switch a.State {
		case api.AllocActive:
			return a.ID, nil
		case api.AllocFailed, api.AllocReleaseFailed, api.AllocReleasing, api.AllocReleased:
			return "", &cmdutil.CodedError{Code: cmdutil.ExitAllocFailed,
				Err: fmt.Errorf("allocation %s for the job is %s: %s", a.ID, a.State, a.Reason)}
		}
		select {
		case <-ctx.Done():
			giveBack(ctx, ios, client, a.ID)
			return "", ctx.Err()
		case <-t.C:
		}
		now, err := client.AllocGet(ctx, a.ID)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				giveBack(ctx, ios, client, a.ID)
			}
			return "", err
		}
		a = now
	}
}

// request prints the price of the allocation a job.yaml's resources.sku
// asks for (alloc.quote: an unknown SKU or too little money is refused
// before anything is created) and creates it with a key derived from
// the run's.
func request(ctx context.Context, ios *cmdutil.IOStreams, client *api.Client, req api.AllocCreateRequest, key string) (*api.Allocation, error) {
	q, err := client.AllocQuote(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("resources: %w", err)
	}
	fmt.Fprintf(ios.ErrOut, "renting %s (%d GPU(s)) at %s per hour\n", q.SKU, q.GPUs, api.FormatMoney(q.PricePerHourMinor, q.Currency))
	return client.AllocCreate(ctx, req, api.WithIdempotencyKey(key+":alloc"))
}
