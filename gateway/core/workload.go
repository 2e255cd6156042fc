package core

import (
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// Workload targets (ssh <workload-id>@gateway, docs/apps.md). The front
// passes the SSH user name as Grant.AllocationID whatever it names; a
// workload's id goes to controld as the request's WorkloadID, and
// controld answers with the workload's allocation, whose node, ticket,
// activity and revocation are the allocation's own. The ticket names the
// workload and hostd runs the sessions in its container.

// authorizeRequest is gate.authorize's request for a grant's target.
func authorizeRequest(g Grant, ticketKey string) gateproto.GateAuthorizeRequest {
	req := gateproto.GateAuthorizeRequest{AllocationID: g.AllocationID, UserID: g.UserID, TicketKey: ticketKey, Certificate: g.Certificate}
	if ids.Valid(ids.Workload, g.AllocationID) {
		req.AllocationID, req.WorkloadID = "", g.AllocationID
	}
	return req
}

// answersFor reports whether controld's answer is for the target asked.
func answersFor(auth *gateproto.GateAuthorizeResponse, target string) bool {
	if ids.Valid(ids.Workload, target) {
		return auth.WorkloadID == target && auth.AllocationID != ""
	}
	return auth.AllocationID == target && auth.WorkloadID == ""
}
