package tasks_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestJobContainerStoppedWhenHostdRestarts: a job runs in its image's
// container when hostd restarts (a new Env of the same host and state
// directory). The restarted hostd, as it starts, removes the container
// the previous one left — nothing runs that no hostd follows — and
// reports the job unknown saying so (controld: lost, retried when its
// retries allow); the retry's job.start then runs it again.
func TestJobContainerStoppedWhenHostdRestarts(t *testing.T) {
	h, env := podmanHost(t)
	ref := tinyJobImage(t)
	alloc := "a-jrs" + strconv.Itoa(os.Getpid())
	provisionTenant(t, env, alloc)
	p := hostproto.JobStartParams{JobID: "j-imgrestart", AllocationID: alloc, PosixUser: api.PosixUser(alloc), Wait: 0, Image: ref,
		Run: `: > ~/running; while :; do sleep 1; done`}
	out, _, err := run(t, env, api.TaskJobStart, p)
	if r := jobReport(t, out, err); r.Ended {
		t.Fatalf("start %+v; want running", r)
	}
	name := tasks.JobContainerName(p.JobID)
	awaitRunning(t, env, alloc, name)

	restarted := h.Env("n-test", testutil.Logger(t))
	if n := tasks.StopJobContainers(context.Background(), restarted); n != 1 {
		t.Errorf("hostd's start stopped %d job containers; want 1", n)
	}
	if names := asTenant(t, restarted, alloc, "ps", "--all", "--format", "{{.Names}}"); strings.TrimSpace(names) != "" {
		t.Fatalf("containers after hostd restarted: %q; want none", names)
	}
	out, _, err = run(t, restarted, api.TaskJobWait, hostproto.JobWaitParams{JobID: p.JobID, Wait: time.Second})
	r := jobReport(t, out, err)
	if !r.Ended || !r.Unknown || !strings.Contains(r.Reason, "its container was stopped when hostd started again") {
		t.Fatalf("wait after the restart: %+v; want unknown, its container stopped", r)
	}
	// A second start finds nothing more to stop.
	if n := tasks.StopJobContainers(context.Background(), restarted); n != 0 {
		t.Errorf("a second start stopped %d; want 0", n)
	}
	// The retry (same job, same container name) runs on the restarted hostd.
	p.Attempt, p.Wait, p.Run = 2, 5*time.Minute, "cat /etc/os-release"
	out, _, err = run(t, restarted, api.TaskJobStart, p)
	if r := jobReport(t, out, err); !r.Ended || r.ExitCode != 0 || !strings.Contains(r.Output, "ID=gpuaas-tiny") {
		t.Fatalf("retry %+v; want it to run in its image", r)
	}
}
