package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestJobsInDev is the first slice of jobs' acceptance (docs/jobs.md) with
// the built binary and `gpuaas dev`: on an active bare-metal allocation,
// `gpuaas run -f job.yaml` with `run: exit 7` exits 7; `run: echo hello`
// exits 0 (its output is not streamed yet); a setup that fails ends the
// job at setup with its code; `release: on-exit` leaves the allocation
// released with reason "job finished", `keep` leaves it active; a
// detached job is followed again with `job wait`, and `job cancel` ends
// it; bad job.yaml is refused naming the field, before anything is
// created.
func TestJobsInDev(t *testing.T) {
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile)
	if r := dev.gpuaas(t, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login exited %d: %s", r.code, r.stderr)
	}
	a := dev.createActive(t, "--sku", "h100-baremetal", "--gpus", "8")
	spec := func(run, release string, extra ...string) string {
		return fmt.Sprintf("resources:\n  allocation: %s\nrun: %q\nrelease: %s\n%s", a.ID, run, release, strings.Join(extra, ""))
	}
	jobs := func() int {
		var list []api.Job
		dev.gpuaasJSON(t, &list, "job", "list", "--json")
		return len(list)
	}

	// Bad input: refused with the field named, nothing created.
	for _, bad := range []struct{ text, want string }{
		{"resources: {allocation: " + a.ID + "}\nrn: exit 0\n", "rn: unknown key"},
		{"resources: {allocation: " + a.ID + "}\n", "run: required"},
		{"resources: {allocation: " + a.ID + "}\nrun: x\nrelease: never\n", "release"},
	} {
		r := dev.gpuaas(t, bad.text, "run", "-f", "-")
		if r.code != 2 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("run %q: exit %d %q; want 2 naming %q", bad.text, r.code, r.stderr, bad.want)
		}
	}
	if r := dev.gpuaas(t, "resources: {allocation: a-000000000000}\nrun: x\n", "run", "-f", "-"); r.code != 6 {
		t.Errorf("run on an unknown allocation: exit %d %q; want 6 (not_found)", r.code, r.stderr)
	}
	if n := jobs(); n != 0 {
		t.Fatalf("%d jobs after refused runs; want 0", n)
	}

	// The job's own exit code, and setup's.
	if r := dev.gpuaas(t, spec("exit 7", "keep"), "run", "-f", "-"); r.code != 7 || !strings.Contains(r.stderr, "exited with 7") {
		t.Errorf("run exit 7: exit %d %q; want 7", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, spec("echo hello", "keep", "setup: exit 3\n"), "run", "-f", "-"); r.code != 3 || !strings.Contains(r.stderr, "setup exited with 3") {
		t.Errorf("run with a failing setup: exit %d %q; want 3 at setup", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, spec(`test "$GREETING" = hello && echo hello`, "keep", "env: {GREETING: hello}\n"), "run", "-f", "-"); r.code != 0 {
		t.Errorf("run echo hello: exit %d %q; want 0", r.code, r.stderr)
	}
	var alloc api.Allocation
	dev.gpuaasJSON(t, &alloc, "alloc", "get", a.ID, "--json")
	if alloc.State != api.AllocActive {
		t.Fatalf("release: keep left the allocation %s; want active", alloc.State)
	}

	// Detached, followed again, cancelled.
	r := dev.gpuaas(t, spec("sleep 300", "keep"), "run", "-f", "-", "--detach")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(id, "j-") {
		t.Fatalf("run --detach: exit %d %q %q; want a job id", r.code, r.stdout, r.stderr)
	}
	testutil.EventuallyWithin(t, time.Minute, "the detached job to run", func() bool {
		var j api.Job
		dev.gpuaasJSON(t, &j, "job", "get", id, "--json")
		return j.State == api.JobRunning
	})
	if r := dev.gpuaas(t, "", "job", "cancel", id); r.code != 0 {
		t.Fatalf("job cancel: exit %d %q", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "job", "wait", id); r.code != 128+15 || !strings.Contains(r.stderr, "cancelled") {
		t.Errorf("job wait of a cancelled job: exit %d %q; want 143 (SIGTERM), cancelled", r.code, r.stderr)
	}

	// release: on-exit releases the allocation with reason "job finished".
	if r := dev.gpuaas(t, spec("true", "on-exit"), "run", "-f", "-"); r.code != 0 {
		t.Fatalf("run on-exit: exit %d %q", r.code, r.stderr)
	}
	testutil.EventuallyWithin(t, time.Minute, "the allocation to be released", func() bool {
		dev.gpuaasJSON(t, &alloc, "alloc", "get", a.ID, "--json")
		return alloc.State == api.AllocReleased
	})
	if alloc.Reason != api.JobReleaseReason {
		t.Errorf("released with reason %q; want %q", alloc.Reason, api.JobReleaseReason)
	}
	if n := jobs(); n != 5 {
		t.Errorf("job list shows %d jobs; want 5", n)
	}
}
