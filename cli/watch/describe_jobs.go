package watch

import (
	"fmt"

	"github.com/gpuaas/gpuaas/internal/api"
)

// jobLine says what became of a job (job.state).
func jobLine(j api.Job) string {
	s := "job " + j.ID + " on " + j.AllocationID + " " + j.State
	if j.Cancelling && !api.JobFinal(j.State) {
		s += ", cancelling"
	}
	if j.ExitCode != nil {
		s += fmt.Sprintf(", exit %d", *j.ExitCode)
	}
	if j.Reason != "" {
		s += " (" + j.Reason + ")"
	}
	return s
}
