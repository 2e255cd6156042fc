package faults

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// ProvisionVerdict is alloc.ProvisionVerdict: a provisioning whose
// pre-handout check failed quarantines the GPUs it names (CheckFailed),
// and one that succeeded on a GPU that failed meanwhile fails
// (ProvisionOutcome).
func ProvisionVerdict(ctx context.Context, tx pgx.Tx, o tasks.Outcome) (string, string, []outbox.Event, error) {
	r := o.Result
	var events []outbox.Event
	if r.Status == hostproto.TaskFailed && r.Phase == api.PhaseGPUCheck {
		var check api.GPUCheckResult
		if json.Unmarshal(r.Result, &check) == nil {
			var err error
			if events, err = CheckFailed(ctx, tx, o.NodeID, check, o.Now); err != nil {
				return "", "", nil, err
			}
		}
	}
	status, reason, err := ProvisionOutcome(ctx, tx, o.AllocationID, r.Status, o.Reason())
	return status, reason, events, err
}
