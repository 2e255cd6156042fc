package job

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestPrintJob(t *testing.T) {
	seven := 7
	ios, _, out, _ := cmdtest.Streams(true)
	j := &api.Job{ID: "j-1", AllocationID: "a-1", NodeID: "n-1", State: api.JobFailed, Phase: api.JobPhaseRun, ExitCode: &seven,
		Reason: "run exited with 7", Release: "keep", CreatedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		Output: "step 1\n\x1b[31mred\x1b[0m", OutputBytes: 4096}
	if err := printJob(ios, j); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"job j-1: failed", "exit code   7", "reason      run exited with 7",
		"output (last 19 of 4096 bytes):\nstep 1\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "\x1b") {
		t.Errorf("output %q passes an escape sequence to the terminal", got)
	}
}

// TestQueuedJobShowsItsPlace: a queued job's place in line in the list's
// state cell (one word), in job get and in job wait's state line.
func TestQueuedJobShowsItsPlace(t *testing.T) {
	j := api.Job{ID: "j-1", AllocationID: "a-1", State: api.JobQueued, QueuePosition: 2, Release: "on-exit"}
	if got := listState(j); got != "queued:2" {
		t.Errorf("list state %q; want queued:2", got)
	}
	if got := jobState(&j, "h100-baremetal"); got != "queued, 2nd in line for h100-baremetal" {
		t.Errorf("state %q", got)
	}
	placed := j
	placed.QueuePosition = 0
	if got := listState(placed); got != "queued" {
		t.Errorf("placed: list state %q; want queued", got)
	}
	ios, _, out, _ := cmdtest.Streams(true)
	if err := printJob(ios, &j); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "allocation  a-1 (2nd in line)") {
		t.Errorf("job get: %q; want its place", out.String())
	}
}

// TestPrintJobAttempt: job get shows which attempt a job with retries
// is at, and nothing about attempts for a job without.
func TestPrintJobAttempt(t *testing.T) {
	ios, _, out, _ := cmdtest.Streams(true)
	j := &api.Job{ID: "j-1", AllocationID: "a-1", NodeID: "n-1", State: api.JobStarting, Attempt: 2, Retries: 2,
		Reason: "attempt 1 lost: hostd stopped", Release: "on-exit"}
	if err := printJob(ios, j); err != nil {
		t.Fatal(err)
	}
	if want := "attempt     2 of at most 3 (retries: 2"; !strings.Contains(out.String(), want) {
		t.Errorf("job get %q lacks %q", out.String(), want)
	}
	ios, _, out, _ = cmdtest.Streams(true)
	if err := printJob(ios, &api.Job{ID: "j-2", State: api.JobRunning, Attempt: 1, Release: "on-exit"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "attempt") {
		t.Errorf("job get of a job without retries %q mentions attempts", out.String())
	}
}
