package e2e

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestJobRetriedAfterHostdKilled is `retries` with the built binary and
// `gpuaas dev` (docs/jobs.md "Retries"): a job with `retries: 1` on a
// slice of a separate `gpuaas hostd` prints a counter; hostd is killed
// with SIGKILL mid-job and started again, so the job is lost; controld
// starts it again on the same allocation as attempt 2, which ends with its
// own exit code, 4 — `job wait` exits 4. `job logs` numbers every line
// once across both attempts, with the attempt marker exactly once between
// attempt 1's counter and attempt 2's lines; `job get` says attempt 2.
// A job without retries on the same node ends lost with the reason
// (`job wait` exits 125) and its allocation is released "job finished"
// (decision 0015: no silent hang).
func TestJobRetriedAfterHostdKilled(t *testing.T) {
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--hosts", "0")
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login: exit %d %s", r.code, r.stderr)
	}
	r := dev.gpuaas(t, "", "node", "enroll", "--name", "retry", "--shape", "gpu_slice")
	token := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(token, "gpe_") {
		t.Fatalf("node enroll: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	server := devServer(t, dev)
	state := tempDir(t, "gpuaas-e2e-hostd-")
	hostd := startHostd(t, server, state, "--token", token)
	testutil.EventuallyWithin(t, time.Minute, "node retry ready", func() bool {
		r := dev.gpuaas(t, "", "node", "get", "retry", "--json", "node", "--jq", ".node.state")
		return strings.TrimSpace(r.stdout) == "ready"
	})

	// Attempt 1 leaves a file in the allocation's home and counts until
	// it is killed; attempt 2 finds the file, prints and exits 4.
	job := `name: retried
resources: {sku: h200-slice, gpus: 4}
retries: 1
run: |
  if [ -e "$HOME/.attempt1" ]; then echo "attempt two"; exit 4; fi
  touch "$HOME/.attempt1"
  i=1; while true; do echo "count $i"; i=$((i+1)); sleep 0.2; done
`
	r = dev.gpuaas(t, job, "run", "-f", "-", "--detach")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(id, "j-") {
		t.Fatalf("run --detach: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	logs := func() []api.LogLine {
		t.Helper()
		r := dev.gpuaas(t, "", "job", "logs", id, "--json")
		if r.code != 0 {
			t.Fatalf("job logs: exit %d %s", r.code, r.stderr)
		}
		var lines []api.LogLine
		for _, s := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if s == "" {
				continue
			}
			var l api.LogLine
			if err := json.Unmarshal([]byte(s), &l); err != nil {
				t.Fatalf("job logs line %q: %v", s, err)
			}
			lines = append(lines, l)
		}
		return lines
	}
	// Beside it, on the same node, a job without retries: it is lost.
	r = dev.gpuaas(t, "resources: {sku: h200-slice, gpus: 4}\nrun: while true; do echo tick; sleep 0.2; done\n",
		"run", "-f", "-", "--detach")
	lostID := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(lostID, "j-") {
		t.Fatalf("run --detach (no retries): exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	testutil.EventuallyWithin(t, 2*time.Minute, "attempt 1 to count to 5", func() bool { return len(logs()) >= 5 })
	testutil.EventuallyWithin(t, time.Minute, "the job without retries to run", func() bool {
		var j api.Job
		dev.gpuaasJSON(t, &j, "job", "get", lostID, "--json", "state")
		return j.State == api.JobRunning
	})
	if err := hostd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = hostd.Process.Wait()
	killedAt := len(logs())
	startHostd(t, server, state) // no token: it keeps its identity

	var got api.Job
	testutil.EventuallyWithin(t, 2*time.Minute, "the job to end", func() bool {
		dev.gpuaasJSON(t, &got, "job", "get", id, "--json", "state,attempt,exit_code,reason")
		return api.JobFinal(got.State)
	})
	if got.State != api.JobFailed || got.Attempt != 2 || got.ExitCode == nil || *got.ExitCode != 4 {
		t.Fatalf("job after the kill: %+v; want failed with exit 4 at attempt 2", got)
	}
	if r := dev.gpuaas(t, "", "job", "wait", id); r.code != 4 {
		t.Errorf("job wait: exit %d %s; want 4, attempt 2's code", r.code, r.stderr)
	}
	// The job without retries ended lost with the reason, job wait says
	// so with the platform's code, and its allocation was released.
	if r := dev.gpuaas(t, "", "job", "wait", lostID); r.code != 125 || !strings.Contains(r.stderr, "hostd stopped") {
		t.Errorf("job wait of the job without retries: exit %d %q; want 125 with the reason", r.code, r.stderr)
	}
	var lost api.Job
	dev.gpuaasJSON(t, &lost, "job", "get", lostID, "--json", "state,attempt,allocation_id,reason")
	if lost.State != api.JobLost || lost.Attempt != 1 {
		t.Errorf("job without retries: %+v; want lost at attempt 1", lost)
	}
	testutil.EventuallyWithin(t, time.Minute, "the lost job's allocation to be released", func() bool {
		var a api.Allocation
		dev.gpuaasJSON(t, &a, "alloc", "get", lost.AllocationID, "--json", "state,reason")
		return a.State == api.AllocReleased && a.Reason == api.JobReleaseReason
	})
	lines := logs()
	markers, count, second := 0, 0, -1
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			t.Fatalf("line %d numbered %d: want one numbering across attempts, every line once", i+1, l.Seq)
		}
		switch {
		case strings.Contains(l.Text, "--- attempt 2 (hostd stopped"):
			markers++
			if l.Stream != "gpuaas" {
				t.Errorf("marker on %s; want gpuaas", l.Stream)
			}
		case strings.HasPrefix(l.Text, "count "):
			count++
			if n, _ := strconv.Atoi(strings.TrimPrefix(l.Text, "count ")); n != count || markers != 0 {
				t.Errorf("line %d %q: want count %d before the marker", l.Seq, l.Text, count)
			}
		case l.Text == "attempt two":
			second = i
		}
	}
	if markers != 1 || second < 0 || second != len(lines)-1 || count < killedAt-1 {
		t.Errorf("log %v: want attempt 1's counter (%d lines when killed), one marker, then attempt two last", texts(lines), killedAt)
	}
	t.Logf("hostd killed after %d lines; job %s ended at attempt %d with exit %d; %d lines, marker: %q",
		killedAt, id, got.Attempt, *got.ExitCode, len(lines), lines[second-1].Text)
}

func texts(lines []api.LogLine) []string {
	var out []string
	for _, l := range lines {
		out = append(out, fmt.Sprintf("%d:%s", l.Seq, l.Text))
	}
	return out
}
