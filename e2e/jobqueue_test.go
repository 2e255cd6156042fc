package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// runProc is a `gpuaas run` left running in the background.
type runProc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan error
}

// startRun starts `gpuaas run -f FILE args...` against dev and stops it
// when t ends.
func startRun(t *testing.T, dev *devProc, file string, args ...string) *runProc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"run", "-f", file}, args...)...)
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

// exit waits for the run to end and returns its exit code.
func (p *runProc) exit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("gpuaas run did not end within %s:\n%s", within, p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

var queuedAllocRE = regexp.MustCompile(`allocation (a-[0-9a-z]+): queued for capacity, (\d+(?:st|nd|rd|th)) in line for h100-baremetal`)

// queuedAt waits until p's stderr says its allocation is at place in
// line, and returns the allocation's id.
func (p *runProc) queuedAt(t *testing.T, place string) string {
	t.Helper()
	var id string
	testutil.EventuallyWithin(t, 60*time.Second, "run to print "+place+" in line", func() bool {
		for _, m := range queuedAllocRE.FindAllStringSubmatch(p.stderr.String(), -1) {
			if m[2] == place {
				id = m[1]
				return true
			}
		}
		return false
	})
	return id
}

// TestRunQueue is `gpuaas run --queue` (docs/jobs.md "Waiting for
// capacity") with the built binary and `gpuaas dev`, whose one bare-metal
// host is taken: two runs wait in line, each printing the price line and
// then its place; Ctrl-C on the first exits 130 and releases its request
// (released, never placed), and the second moves up to 1st in line; once
// the host is free the second is placed, runs its job (its output, its
// exit code 5) and releases its allocation (release: on-exit). Without
// --queue the same run fails with no_capacity (exit 9) and creates
// nothing; --queue with resources.allocation is refused (exit 2).
// (--queue --detach: jobqueue2_test.go.)
func TestRunQueue(t *testing.T) {
	dev, cfg := loggedInDev(t)
	node := dev.createActive(t, "--sku", "h100-baremetal", "--gpus", "8")
	job := writeFile(t, cfg, "job.yaml", "name: queued\nresources: {sku: h100-baremetal, gpus: 8}\nrun: echo ran-after-waiting; exit 5\n")
	allocs := func() int {
		var list []api.Allocation
		dev.gpuaasJSON(t, &list, "alloc", "list", "--json", "id")
		return len(list)
	}

	// Refusals: nothing created.
	if r := dev.gpuaas(t, "", "run", "-f", job); r.code != 9 || !strings.Contains(r.stderr, "no_capacity") && !strings.Contains(r.stderr, "capacity") {
		t.Errorf("run without --queue on a full SKU: exit %d %q; want 9 (no_capacity)", r.code, r.stderr)
	}
	onAlloc := writeFile(t, cfg, "on.yaml", "resources: {allocation: "+node.ID+"}\nrun: exit 0\n")
	if r := dev.gpuaas(t, "", "run", "-f", onAlloc, "--queue"); r.code != 2 || !strings.Contains(r.stderr, "resources: --queue needs resources.sku") {
		t.Errorf("run --queue on an allocation: exit %d %q; want 2 naming resources", r.code, r.stderr)
	}
	if n := allocs(); n != 1 {
		t.Fatalf("%d allocations after the refusals; want 1 (the node's)", n)
	}

	// Two runs wait in line, the price line first.
	first := startRun(t, dev, job, "--queue")
	firstID := first.queuedAt(t, "1st")
	second := startRun(t, dev, job, "--queue")
	secondID := second.queuedAt(t, "2nd")
	for _, p := range []*runProc{first, second} {
		s := p.stderr.String()
		if price := strings.Index(s, "renting h100-baremetal (8 GPU(s)) at "); price < 0 || price > strings.Index(s, "queued for capacity") {
			t.Errorf("run --queue's stderr does not print the price line before its place in line:\n%s", s)
		}
	}

	// Ctrl-C on the first: its request leaves the line, nothing charged;
	// the second moves up.
	if err := first.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := first.exit(t, 30*time.Second); code != 130 || !strings.Contains(first.stderr.String(), "allocation "+firstID+" released: interrupted before the job started") {
		t.Errorf("run --queue on SIGINT: exit %d\n%s\nwant 130 and its allocation released", code, first.stderr.String())
	}
	var a api.Allocation
	dev.gpuaasJSON(t, &a, "alloc", "get", firstID, "--json")
	if a.State != api.AllocReleased && a.State != api.AllocReleasing || a.Usage != nil || a.NodeID != "" {
		t.Errorf("the interrupted run's allocation: %s (node %q, usage %+v); want released, never placed nor charged", a.State, a.NodeID, a.Usage)
	}
	second.queuedAt(t, "1st")

	// The host freed: the second is placed and runs its job.
	if r := dev.gpuaas(t, "", "alloc", "release", node.ID, "--yes"); r.code != 0 {
		t.Fatalf("release %s: exit %d %s", node.ID, r.code, r.stderr)
	}
	if code := second.exit(t, 3*time.Minute); code != 5 || second.stdout.String() != "ran-after-waiting\n" {
		t.Errorf("the queued run: exit %d, stdout %q\n%s\nwant 5 and its output", code, second.stdout.String(), second.stderr.String())
	}
	testutil.EventuallyWithin(t, 60*time.Second, "the queued job's allocation to be released", func() bool {
		dev.gpuaasJSON(t, &a, "alloc", "get", secondID, "--json")
		return a.State == api.AllocReleased
	})
	if a.Reason != "job finished" {
		t.Errorf("the queued job's allocation: released with reason %q; want job finished", a.Reason)
	}
}
