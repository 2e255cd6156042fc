package watch

import (
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestJobLineNamesTheJobAndItsPlaceInLine: a job.state line carries the
// job's name and, while it waits for capacity, its place in line, as
// `gpuaas job list` shows them.
func TestJobLineNamesTheJobAndItsPlaceInLine(t *testing.T) {
	tests := []struct {
		job  api.Job
		want string
	}{
		{api.Job{ID: "j-1", Name: "train", AllocationID: "a-1", State: api.JobQueued, QueuePosition: 2}, "job j-1 (train) on a-1 queued:2"},
		{api.Job{ID: "j-1", AllocationID: "a-1", State: api.JobQueued}, "job j-1 on a-1 queued"},
		{api.Job{ID: "j-1", Name: "train", AllocationID: "a-1", State: api.JobRunning, Cancelling: true}, "job j-1 (train) on a-1 running, cancelling"},
	}
	for _, tt := range tests {
		if got := jobLine(tt.job); got != tt.want {
			t.Errorf("jobLine(%+v) = %q; want %q", tt.job, got, tt.want)
		}
	}
}
