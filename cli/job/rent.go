package job

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// rent rents the allocation a job.yaml's resources.sku asks for: its
// price first (alloc.quote: an unknown SKU or too little money is refused
// before anything is created), then alloc.create with a key derived from
// the run's (a retry of the run reuses it), then a wait until it is
// active. An allocation that fails ends the run with ExitAllocFailed.
func rent(ctx context.Context, ios *cmdutil.IOStreams, client *api.Client, req api.AllocCreateRequest, key string) (string, error) {
	q, err := client.AllocQuote(ctx, req)
	if err != nil {
		return "", fmt.Errorf("resources: %w", err)
	}
	fmt.Fprintf(ios.ErrOut, "renting %s (%d GPU(s)) at %s per hour\n", q.SKU, q.GPUs, api.FormatMoney(q.PricePerHourMinor, q.Currency))
	a, err := client.AllocCreate(ctx, req, api.WithIdempotencyKey(key+":alloc"))
	if err != nil {
		return "", err
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	shown := ""
	for {
		if a.State != shown {
			fmt.Fprintf(ios.ErrOut, "allocation %s: %s\n", a.ID, a.State)
			shown = a.State
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
			return "", ctx.Err()
		case <-t.C:
		}
		if a, err = client.AllocGet(ctx, a.ID); err != nil {
			return "", err
		}
	}
}
