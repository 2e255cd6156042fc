package core

import (
	"testing"

	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// TestWorkloadTargets: a workload id in the SSH user name goes to
// controld as the request's workload, an allocation id as its
// allocation, and an answer counts only for the target asked (an
// allocation's answer for a workload, or a workload's for its
// allocation, does not).
func TestWorkloadTargets(t *testing.T) {
	const wl, alloc = "w-0123456789ab", "a-0123456789ab"
	if req := authorizeRequest(Grant{AllocationID: wl, UserID: "u-1"}, "k"); req.WorkloadID != wl || req.AllocationID != "" {
		t.Errorf("workload: %+v", req)
	}
	if req := authorizeRequest(Grant{AllocationID: alloc, UserID: "u-1"}, "k"); req.WorkloadID != "" || req.AllocationID != alloc {
		t.Errorf("allocation: %+v", req)
	}
	for _, tt := range []struct {
		name   string
		target string
		auth   gateproto.GateAuthorizeResponse
		want   bool
	}{
		{"workload", wl, gateproto.GateAuthorizeResponse{AllocationID: alloc, WorkloadID: wl}, true},
		{"workload answered as an allocation", wl, gateproto.GateAuthorizeResponse{AllocationID: alloc}, false},
		{"another workload", wl, gateproto.GateAuthorizeResponse{AllocationID: alloc, WorkloadID: "w-000000000000"}, false},
		{"workload without allocation", wl, gateproto.GateAuthorizeResponse{WorkloadID: wl}, false},
		{"allocation", alloc, gateproto.GateAuthorizeResponse{AllocationID: alloc}, true},
		{"allocation answered with a workload", alloc, gateproto.GateAuthorizeResponse{AllocationID: alloc, WorkloadID: wl}, false},
		{"another allocation", alloc, gateproto.GateAuthorizeResponse{AllocationID: "a-000000000000"}, false},
	} {
		if got := answersFor(&tt.auth, tt.target); got != tt.want {
			t.Errorf("%s: got %v; want %v", tt.name, got, tt.want)
		}
	}
}
