package tasks_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestJobStartsInItsWorkdir: with a workdir, setup and run start in it
// (relative to the renter's home), the script's line numbers are its
// own; a workdir that is not there fails the job at phase workdir before
// anything runs, with the reason and no start time (a platform failure).
func TestJobStartsInItsWorkdir(t *testing.T) {
	t.Parallel()
	const alloc = "a-jobwd000001"
	env, user := jobHost(t, alloc)
	const dir = ".gpuaas/workdirs/w-0123456789abcdef0123"
	start := func(id string, p hostproto.JobStartParams) hostproto.JobReport {
		t.Helper()
		p.JobID, p.AllocationID, p.PosixUser, p.Wait = id, alloc, user, time.Minute
		out, _, err := run(t, env, api.TaskJobStart, p)
		return jobReport(t, out, err)
	}
	// What the upload leaves in the home (internal/workdir's script).
	if r := start("j-wd-prep", hostproto.JobStartParams{Run: "mkdir -p " + dir + " && echo uploaded > " + dir + "/in.txt"}); r.ExitCode != 0 {
		t.Fatalf("preparing the workdir: %+v", r)
	}
	r := start("j-wd-in", hostproto.JobStartParams{Workdir: dir, Setup: "test -f in.txt", Run: "cat in.txt\nno-such-command-wd"})
	if !r.Ended || r.ExitCode != 127 || r.Phase != api.JobPhaseRun || !strings.HasPrefix(r.Output, "uploaded\n") ||
		!strings.Contains(r.Output, "2: no-such-command-wd") {
		t.Errorf("job in its workdir: %+v; want run read in.txt, its error naming line 2", r)
	}
	r = start("j-wd-missing", hostproto.JobStartParams{Workdir: ".gpuaas/workdirs/w-ffffffffffffffffffff", Setup: "echo setup ran", Run: "echo run ran"})
	if !r.Ended || r.Phase != api.JobPhaseWorkdir || r.StartedAt != nil || r.ExitCode == 0 ||
		!strings.Contains(r.Reason, "is not a directory on the node") || strings.Contains(r.Output, "ran") {
		t.Errorf("job with a missing workdir: %+v; want it failed at workdir, no start time, nothing run", r)
	}
}
