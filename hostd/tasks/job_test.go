package tasks_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// jobHost is a bare-metal sim host with an allocation's user provisioned:
// jobs run through its environment as that user.
func jobHost(t *testing.T, alloc string) (*tasks.Env, string) {
	t.Helper()
	_, env := simHost(t, sim.H100Baremetal8())
	user := api.PosixUser(alloc)
	if _, _, err := run(t, env, api.TaskProvisionUser, hostproto.UserProvisionParams{AllocationID: alloc, UserID: "u-1", PosixUser: user}); err != nil {
		t.Fatal(err)
	}
	return env, user
}

func jobReport(t *testing.T, out any, err error) hostproto.JobReport {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	r, ok := out.(hostproto.JobReport)
	if !ok {
		t.Fatalf("result %T; want hostproto.JobReport", out)
	}
	return r
}

func TestJobStartReportsExitCode(t *testing.T) {
	t.Parallel()
	const alloc = "a-job00000001"
	env, user := jobHost(t, alloc)
	marker := filepath.Join(t.TempDir(), "setup-ran")
	tests := []struct {
		name      string
		p         hostproto.JobStartParams
		wantCode  int
		wantPhase string
	}{
		{"exit 7", hostproto.JobStartParams{Run: "exit 7"}, 7, api.JobPhaseRun},
		{"succeeds with env", hostproto.JobStartParams{Run: `test "$GREETING" = hello`, Env: []string{"GREETING=hello"}}, 0, api.JobPhaseRun},
		{"setup fails", hostproto.JobStartParams{Setup: "exit 3", Run: "exit 0"}, 3, api.JobPhaseSetup},
		{"setup then run", hostproto.JobStartParams{Setup: "touch " + marker, Run: "test -e " + marker}, 0, api.JobPhaseRun},
	}
	for i, tt := range tests {
		p := tt.p
		p.JobID, p.AllocationID, p.PosixUser, p.Wait = "j-t"+string(rune('a'+i)), alloc, user, time.Minute
		out, _, err := run(t, env, api.TaskJobStart, p)
		r := jobReport(t, out, err)
		if !r.Ended || r.ExitCode != tt.wantCode || r.Phase != tt.wantPhase || r.Unknown || r.EndedAt == nil {
			t.Errorf("%s: got %+v; want ended in %s with %d", tt.name, r, tt.wantPhase, tt.wantCode)
		}
	}
}

func TestJobWaitFollowsALongJob(t *testing.T) {
	t.Parallel()
	const alloc = "a-job00000002"
	env, user := jobHost(t, alloc)
	release := filepath.Join(t.TempDir(), "go")
	p := hostproto.JobStartParams{JobID: "j-long", AllocationID: alloc, PosixUser: user, Wait: time.Second,
		Run: "while ! test -e " + release + "; do sleep 0.05; done; exit 5"}
	out, _, err := run(t, env, api.TaskJobStart, p)
	if r := jobReport(t, out, err); r.Ended || r.Phase != api.JobPhaseRun || r.StartedAt == nil {
		t.Fatalf("first report %+v; want running", r)
	}
	// A job.start delivered again is not a second job.
	out, _, err = run(t, env, api.TaskJobStart, p)
	if r := jobReport(t, out, err); r.Ended {
		t.Fatalf("second start %+v; want the same job, running", r)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err = run(t, env, api.TaskJobWait, hostproto.JobWaitParams{JobID: "j-long", Wait: time.Minute})
	if r := jobReport(t, out, err); !r.Ended || r.ExitCode != 5 {
		t.Fatalf("wait %+v; want ended with 5", r)
	}
}

func TestJobStopCancels(t *testing.T) {
	t.Parallel()
	const alloc = "a-job00000003"
	env, user := jobHost(t, alloc)
	p := hostproto.JobStartParams{JobID: "j-stop", AllocationID: alloc, PosixUser: user, Wait: time.Second, Run: "sleep 300"}
	out, _, err := run(t, env, api.TaskJobStart, p)
	if r := jobReport(t, out, err); r.Ended {
		t.Fatalf("start %+v; want running", r)
	}
	out, _, err = run(t, env, api.TaskJobStop, hostproto.JobStopParams{JobID: "j-stop", Grace: time.Second})
	if err != nil || !out.(api.JobStopReport).Signaled {
		t.Fatalf("stop: %v %+v; want signalled", err, out)
	}
	out, _, err = run(t, env, api.TaskJobWait, hostproto.JobWaitParams{JobID: "j-stop", Wait: time.Minute})
	if r := jobReport(t, out, err); !r.Ended || !r.Cancelled || r.Signal != "SIGTERM" {
		t.Fatalf("wait %+v; want ended, cancelled by SIGTERM", r)
	}
}

func TestJobTimeoutEndsIt(t *testing.T) {
	t.Parallel()
	const alloc = "a-job00000004"
	env, user := jobHost(t, alloc)
	p := hostproto.JobStartParams{JobID: "j-timeout", AllocationID: alloc, PosixUser: user, Wait: time.Minute,
		Run: "sleep 300", Timeout: 200 * time.Millisecond}
	out, _, err := run(t, env, api.TaskJobStart, p)
	if r := jobReport(t, out, err); !r.Ended || !r.TimedOut || r.Signal != "SIGTERM" {
		t.Fatalf("got %+v; want ended by its timeout", r)
	}
}

// TestJobUnknownAfterRestart: a restarted hostd — a new task Env from
// the same host and state directory, as a restart in the same process
// (gpuaas dev) makes — does not know the jobs of the one before it and
// reports them unknown, which controld records as lost
// (docs/decisions/0015-jobs-on-the-node.md).
func TestJobUnknownAfterRestart(t *testing.T) {
	t.Parallel()
	const alloc = "a-job00000007"
	h, env := simHost(t, sim.H100Baremetal8())
	user := api.PosixUser(alloc)
	if _, _, err := run(t, env, api.TaskProvisionUser, hostproto.UserProvisionParams{AllocationID: alloc, UserID: "u-1", PosixUser: user}); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, env, api.TaskJobStart, hostproto.JobStartParams{JobID: "j-before", AllocationID: alloc, PosixUser: user,
		Wait: 0, Run: "sleep 2"})
	if r := jobReport(t, out, err); r.Ended {
		t.Fatalf("start %+v; want running", r)
	}
	restarted := h.Env("n-test", testutil.Logger(t))
	out, _, err = run(t, restarted, api.TaskJobWait, hostproto.JobWaitParams{JobID: "j-before", Wait: time.Second})
	r := jobReport(t, out, err)
	if !r.Ended || !r.Unknown || !strings.Contains(r.Reason, "restarted") {
		t.Fatalf("got %+v; want unknown, with the reason", r)
	}
}

func TestJobStartRefusesBadParams(t *testing.T) {
	t.Parallel()
	_, env := simHost(t, sim.H100Baremetal8())
	for _, p := range []hostproto.JobStartParams{
		{JobID: "j-1", AllocationID: "a-job00000005", PosixUser: api.PosixUser("a-job00000005")},              // no run
		{JobID: "j-1", AllocationID: "nope", PosixUser: "x", Run: "true"},                                     // bad allocation
		{JobID: "j-1", AllocationID: "a-job00000005", PosixUser: "root;rm", Run: "true"},                      // bad user
		{JobID: "j-1", AllocationID: "a-job00000005", PosixUser: api.PosixUser("a-nouser00001"), Run: "true"}, // no such user
	} {
		if _, _, err := run(t, env, api.TaskJobStart, p); err == nil {
			t.Errorf("%+v: started; want refused", p)
		}
	}
}

// TestJobOutputTail: the final report carries the end of the output,
// stdout and stderr, at most 16 KiB, and counts all of it.
func TestJobOutputTail(t *testing.T) {
	t.Parallel()
	const alloc = "a-job00000006"
	env, user := jobHost(t, alloc)
	out, _, err := run(t, env, api.TaskJobStart, hostproto.JobStartParams{JobID: "j-out", AllocationID: alloc, PosixUser: user,
		Wait: time.Minute, Run: "echo hello; echo oops >&2"})
	if r := jobReport(t, out, err); r.Output != "hello\noops\n" || r.OutputBytes != 11 {
		t.Errorf("got output %q (%d bytes); want hello and oops", r.Output, r.OutputBytes)
	}
	out, _, err = run(t, env, api.TaskJobStart, hostproto.JobStartParams{JobID: "j-big", AllocationID: alloc, PosixUser: user,
		Wait: time.Minute, Run: "head -c 40000 /dev/zero | tr '\\0' a; printf 'END\\0'"})
	r := jobReport(t, out, err)
	if len(r.Output) != 16<<10+2 || r.OutputBytes != 40004 || !strings.HasSuffix(r.Output, "END\uFFFD") {
		t.Errorf("got %d bytes of output, %d in all, ending %q; want the last 16 KiB (NUL replaced), 40004 in all",
			len(r.Output), r.OutputBytes, r.Output[max(0, len(r.Output)-8):])
	}
}

// TestJobStopKillsAfterGrace: a job that ignores SIGTERM gets SIGKILL
// once the grace period passed.
func TestJobStopKillsAfterGrace(t *testing.T) {
	t.Parallel()
	const alloc = "a-job00000008"
	env, user := jobHost(t, alloc)
	// Wait lets the process start first: this is about SIGKILL.
	p := hostproto.JobStartParams{JobID: "j-stubborn", AllocationID: alloc, PosixUser: user, Wait: 300 * time.Millisecond,
		Run: "trap '' TERM; sleep 300"}
	out, _, err := run(t, env, api.TaskJobStart, p)
	if r := jobReport(t, out, err); r.Ended {
		t.Fatalf("start %+v; want running", r)
	}
	if out, _, err := run(t, env, api.TaskJobStop, hostproto.JobStopParams{JobID: "j-stubborn", Grace: 200 * time.Millisecond}); err != nil || !out.(api.JobStopReport).Signaled {
		t.Fatalf("stop: %v %+v; want signalled", err, out)
	}
	out, _, err = run(t, env, api.TaskJobWait, hostproto.JobWaitParams{JobID: "j-stubborn", Wait: time.Minute})
	if r := jobReport(t, out, err); !r.Ended || !r.Cancelled || r.Signal != "SIGKILL" || r.ExitCode != 137 {
		t.Fatalf("wait %+v; want cancelled by SIGKILL (137)", r)
	}
}

// TestJobStopInSetupSkipsRun: a job stopped during setup is cancelled
// there: run never starts.
func TestJobStopInSetupSkipsRun(t *testing.T) {
	t.Parallel()
	const alloc = "a-job00000009"
	env, user := jobHost(t, alloc)
	marker := filepath.Join(t.TempDir(), "ran")
	p := hostproto.JobStartParams{JobID: "j-early", AllocationID: alloc, PosixUser: user, Wait: 0,
		Setup: "sleep 0.3", Run: "touch " + marker}
	out, _, err := run(t, env, api.TaskJobStart, p)
	if r := jobReport(t, out, err); r.Ended {
		t.Fatalf("start %+v; want running", r)
	}
	if out, _, err := run(t, env, api.TaskJobStop, hostproto.JobStopParams{JobID: "j-early", Grace: time.Second}); err != nil || !out.(api.JobStopReport).Signaled {
		t.Fatalf("stop: %v %+v; want the job stopped", err, out)
	}
	out, _, err = run(t, env, api.TaskJobWait, hostproto.JobWaitParams{JobID: "j-early", Wait: time.Minute})
	if r := jobReport(t, out, err); !r.Ended || !r.Cancelled || r.Phase != api.JobPhaseSetup {
		t.Fatalf("wait %+v; want cancelled in setup", r)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("run started after the stop")
	}
}

// TestJobStopBeforeStart: job.stop and job.start are node tasks, in no
// set order: a stop that comes first keeps the job from ever starting.
func TestJobStopBeforeStart(t *testing.T) {
	t.Parallel()
	const alloc = "a-job0000000a"
	env, user := jobHost(t, alloc)
	marker := filepath.Join(t.TempDir(), "ran")
	if out, _, err := run(t, env, api.TaskJobStop, hostproto.JobStopParams{JobID: "j-never", Grace: time.Second}); err != nil || !out.(api.JobStopReport).Signaled {
		t.Fatalf("stop: %v %+v; want the job stopped", err, out)
	}
	out, _, err := run(t, env, api.TaskJobStart, hostproto.JobStartParams{JobID: "j-never", AllocationID: alloc, PosixUser: user,
		Wait: time.Second, Run: "touch " + marker})
	if r := jobReport(t, out, err); !r.Ended || !r.Cancelled || r.StartedAt != nil {
		t.Fatalf("start after stop: %+v; want cancelled, never started", r)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the job ran after its stop")
	}
}
