package volume

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// pollEvery is how often --wait reads the volume again.
const pollEvery = 250 * time.Millisecond

// waitFor reads volume id until done says so, it failed, or timeout
// passes (ExitWaitTimeout).
func waitFor(ctx context.Context, client *api.Client, id string, timeout time.Duration, done func(api.Volume) bool) (*api.Volume, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		v, err := client.VolumeGet(ctx, api.VolumeRef{Volume: id})
		switch {
		case err == nil && done(*v):
			return v, nil
		case err == nil && v.State == api.VolumeFailed:
			return v, fmt.Errorf("volume %s failed: %s", v.Name, v.Reason)
		case err != nil && ctx.Err() == nil:
			return nil, err
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return nil, &cmdutil.CodedError{Code: cmdutil.ExitWaitTimeout,
					Err: fmt.Errorf("volume %s: still not done after %s", id, timeout)}
			}
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
