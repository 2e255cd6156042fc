package watch

import (
	"fmt"

	"github.com/gpuaas/gpuaas/internal/api"
)

// jobLine says what became of a job (job.state): its name when it has
// one, and a queued job's place in line as `job list` shows it
// ("queued:2").
func jobLine(j api.Job) string {
	s := "job " + j.ID
	if j.Name != "" {
		s += " (" + j.Name + ")"
	}
	s += " on " + j.AllocationID + " " + j.State
	if j.State == api.JobQueued && j.QueuePosition > 0 {
		s += fmt.Sprintf(":%d", j.QueuePosition)
	}
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
