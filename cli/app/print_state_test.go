package app

import (
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

func TestStateTextMarksAnImageNoLongerTrusted(t *testing.T) {
	for _, tt := range []struct {
		w    api.Workload
		want string
	}{
		{api.Workload{State: api.WorkloadRunning, ImageTrust: api.TrustVerified}, "running"},
		{api.Workload{State: api.WorkloadRunning, ImageTrust: api.TrustRevoked}, "running (image revoked)"},
		{api.Workload{State: api.WorkloadRunning, Stopping: true, ImageTrust: api.TrustRevoked}, "running (stopping) (image revoked)"},
		{api.Workload{State: api.WorkloadStopped, ImageTrust: api.TrustRevoked}, "stopped"},
		{api.Workload{State: api.WorkloadPending}, "pending"},
	} {
		if got := stateText(tt.w); got != tt.want {
			t.Errorf("stateText(%+v) = %q; want %q", tt.w, got, tt.want)
		}
	}
}
