package idle

import (
	"context"

	"github.com/gpuaas/gpuaas/controld/jobs"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// jobKeepsIt is errNotDue for an idle release of an allocation that runs
// a job: a job is activity no session shows (docs/jobs.md). A release for
// max_duration still happens.
func jobKeepsIt(ctx context.Context, q store.Querier, d due) error {
	if d.reason != api.ReasonIdle {
		return nil
	}
	busy, err := jobs.Running(ctx, q, d.ID)
	if err != nil {
		return err
	}
	if busy {
		return errNotDue
	}
	return nil
}
