package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// startGpuaas starts `gpuaas args...` against dev in the background and
// stops it when t ends (runProc: its output and exit code).
func startGpuaas(t *testing.T, dev *devProc, args ...string) *runProc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "GPUAAS_CONFIG_DIR="+dev.configDir, "NO_COLOR=1")
	p := &runProc{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// TestRunQueueDetached is `gpuaas run --queue --detach` (docs/jobs.md
// "Waiting for capacity") with the built binary and `gpuaas dev`, whose
// one bare-metal host is taken: two runs return at once with their job
// ids, queued 1st and 2nd in line (job list shows queued:1, queued:2);
// a workdir cannot be queued detached (exit 2, nothing created); job
// cancel of the 2nd takes it out of the line (its allocation released,
// never placed nor charged); `job wait` on the 1st waits while it is
// queued (as does job logs -f), and once the host is freed the job starts
// by itself — no client is attached — and job wait exits with its exit
// code (6) and prints its output, job logs -f prints it and ends; its allocation is released (release: on-exit).
func TestRunQueueDetached(t *testing.T) {
	dev, cfg := loggedInDev(t)
	node := dev.createActive(t, "--sku", "h100-baremetal", "--gpus", "8")
	job := writeFile(t, cfg, "job.yaml", "name: q1\nresources: {sku: h100-baremetal, gpus: 8}\nrun: echo ran-by-itself; exit 6\n")
	allocs := func() int {
		var list []api.Allocation
		dev.gpuaasJSON(t, &list, "alloc", "list", "--json", "id")
		return len(list)
	}

	if err := os.Mkdir(cfg+"/src", 0o755); err != nil {
		t.Fatal(err)
	}
	withDir := writeFile(t, cfg, "wd.yaml", "resources: {sku: h100-baremetal, gpus: 8}\nworkdir: src\nrun: exit 0\n")
	if r := dev.gpuaas(t, "", "run", "-f", withDir, "--queue", "--detach"); r.code != 2 || !strings.Contains(r.stderr, "workdir: cannot be used with --queue --detach") {
		t.Errorf("run --queue --detach with a workdir: exit %d %q; want 2 naming workdir", r.code, r.stderr)
	}
	if n := allocs(); n != 1 {
		t.Fatalf("%d allocations after the refusal; want 1 (the node's)", n)
	}

	detached := func(file, place string) string {
		t.Helper()
		start := time.Now()
		r := dev.gpuaas(t, "", "run", "-f", file, "--queue", "--detach")
		id := strings.TrimSpace(r.stdout)
		if r.code != 0 || !strings.HasPrefix(id, "j-") || !strings.Contains(r.stderr, "queued, "+place+" in line for h100-baremetal") {
			t.Fatalf("run --queue --detach: exit %d, stdout %q, stderr %q; want a job id, %s in line", r.code, r.stdout, r.stderr, place)
		}
		t.Logf("run --queue --detach returned in %s", time.Since(start))
		return id
	}
	first := detached(job, "1st")
	second := detached(writeFile(t, cfg, "job2.yaml", "name: q2\nresources: {sku: h100-baremetal, gpus: 8}\nrun: exit 0\n"), "2nd")
	r := dev.gpuaas(t, "", "job", "list")
	for _, want := range []string{first + "\tqueued:1", second + "\tqueued:2"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("job list:\n%s\nlacks %q", r.stdout, want)
		}
	}

	// job wait and job logs -f on a queued job wait; they are what
	// follows the job.
	wait := startGpuaas(t, dev, "job", "wait", first)
	logs := startGpuaas(t, dev, "job", "logs", "-f", first)
	testutil.EventuallyWithin(t, 30*time.Second, "job wait to show the queued job", func() bool {
		return strings.Contains(wait.stderr.String(), "job "+first+": queued, 1st in line")
	})

	// Cancel the second: out of the line, its allocation never charged.
	var j2 api.Job
	dev.gpuaasJSON(t, &j2, "job", "get", second, "--json")
	if r := dev.gpuaas(t, "", "job", "cancel", second); r.code != 0 || !strings.Contains(r.stderr, "cancelled before it started") {
		t.Errorf("job cancel of a queued job: exit %d %q", r.code, r.stderr)
	}
	var a api.Allocation
	dev.gpuaasJSON(t, &a, "alloc", "get", j2.AllocationID, "--json")
	if a.State != api.AllocReleased || a.Usage != nil || a.NodeID != "" {
		t.Errorf("the cancelled job's allocation: %s (node %q, usage %+v); want released, never placed nor charged", a.State, a.NodeID, a.Usage)
	}
	if r := dev.gpuaas(t, "", "job", "wait", second); r.code != 1 || !strings.Contains(r.stderr, "cancelled") {
		t.Errorf("job wait on the cancelled queued job: exit %d %q; want 1, cancelled", r.code, r.stderr)
	}

	// The host freed: the first starts by itself and ends with 6.
	if r := dev.gpuaas(t, "", "alloc", "release", node.ID, "--yes"); r.code != 0 {
		t.Fatalf("release %s: exit %d %s", node.ID, r.code, r.stderr)
	}
	if code := wait.exit(t, 3*time.Minute); code != 6 || !strings.Contains(wait.stdout.String(), "ran-by-itself") {
		t.Errorf("job wait on the queued job: exit %d, stdout %q\n%s\nwant 6 and its output", code, wait.stdout.String(), wait.stderr.String())
	}
	if code := logs.exit(t, time.Minute); code != 0 || !strings.Contains(logs.stdout.String(), "ran-by-itself") {
		t.Errorf("job logs -f on the queued job: exit %d, stdout %q\n%s\nwant 0 and its output", code, logs.stdout.String(), logs.stderr.String())
	}
	var j1 api.Job
	dev.gpuaasJSON(t, &j1, "job", "get", first, "--json")
	testutil.EventuallyWithin(t, 60*time.Second, "the queued job's allocation to be released", func() bool {
		dev.gpuaasJSON(t, &a, "alloc", "get", j1.AllocationID, "--json")
		return a.State == api.AllocReleased
	})
	if a.Reason != api.JobReleaseReason || j1.StartedAt == nil {
		t.Errorf("job %+v, allocation released with %q; want started, %q", j1, a.Reason, api.JobReleaseReason)
	}
}
