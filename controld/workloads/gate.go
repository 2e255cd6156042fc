package workloads

import (
	"context"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// GateTarget resolves the workload a user named at the gateway (ssh
// <workload-id>@gateway, docs/apps.md) to its allocation, which the
// gateway then authorizes exactly as `ssh <allocation>@gateway`. The id is
// the client's choice: a malformed one, an unknown one and one of a
// project the user cannot see get the same refusal (not found), so the
// gateway tells nobody which workloads exist. Only a running workload has
// a container to enter; any other state is refused naming it.
func GateTarget(ctx context.Context, q store.Querier, userID, id string) (api.Workload, error) {
	if !ids.Valid(IDPrefix, id) {
		return api.Workload{}, notFound(id)
	}
	// The user's own view: a platform role does not widen it, as for the
	// allocation (gate.authorize).
	w, err := Get(ctx, q, alloc.Actor{UserID: userID, Role: api.RoleUser}, id)
	if err != nil {
		return w, err
	}
	if w.RemovedAt != nil {
		return w, notFound(id)
	}
	if w.State != api.WorkloadRunning {
		msg := "workload %s is %s, not running: only a running workload's container can be entered"
		return w, api.Errorf(api.CodeConflict, msg, w.ID, w.State).WithHint("see `gpuaas app get " + w.ID + "`")
	}
	return w, nil
}
