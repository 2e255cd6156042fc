package watch

import (
	"fmt"

	"github.com/gpuaas/gpuaas/internal/api"
)

// workloadLine is "workload w-… (web, tiny) on a-… running".
func workloadLine(w api.Workload) string {
	s := fmt.Sprintf("workload %s (%s, %s) on %s %s", w.ID, w.Name, w.Image, w.AllocationID, w.State)
	if w.Stopping && !api.WorkloadFinal(w.State) {
		s += ", stopping"
	}
	if w.ExitCode != nil {
		s += fmt.Sprintf(", exit %d", *w.ExitCode)
	}
	if w.Reason != "" {
		s += " (" + w.Reason + ")"
	}
	return s
}
