package gate

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/workloads"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// checkTarget refuses a gate.authorize that names neither or both of
// an allocation and a workload.
func checkTarget(req gateproto.GateAuthorizeRequest) error {
	if req.UserID == "" || (req.AllocationID == "") == (req.WorkloadID == "") {
		return api.Errorf(api.CodeInvalidArgument, "user_id and one of allocation_id and workload_id are required")
	}
	return nil
}

// workloadTarget resolves a workload target (ssh <workload-id>@gateway,
// docs/apps.md) to its allocation, which gate.authorize then checks with
// the allocation's own rules (the user's role in the project, the
// allocation active), and records it in the audit detail. For an
// allocation target it returns req.AllocationID unchanged.
func workloadTarget(ctx context.Context, tx pgx.Tx, req gateproto.GateAuthorizeRequest, userID string, detail map[string]any) (string, error) {
	if req.WorkloadID == "" {
		return req.AllocationID, nil
	}
	detail["workload_id"] = req.WorkloadID
	w, err := workloads.GateTarget(ctx, tx, userID, req.WorkloadID)
	if err != nil {
		return "", err
	}
	return w.AllocationID, nil
}
