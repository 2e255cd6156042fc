package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestJobLogsInDev is item 4 of jobs (logs) with the built binary and
// `gpuaas dev`: `gpuaas run` prints the job's lines while it runs (job
// list says it runs when its first lines are shown), stdout and stderr apart; `job logs --json` gives every line
// numbered once; a `job logs -f` killed mid-stream and started again
// with --after the last line it printed misses and repeats nothing.
func TestJobLogsInDev(t *testing.T) {
	dev, _ := loggedInDev(t)
	a := dev.createActive(t, "--sku", "h100-baremetal", "--gpus", "8")
	// The job prints two lines, pauses, then counts: the test sees the
	// first lines while the job runs (job get says so).
	spec := func(n int) string {
		run := fmt.Sprintf(`echo first; echo oops >&2; sleep 8; i=1; while [ $i -le %d ]; do echo "n $i"; i=$((i+1)); sleep 0.02; done`, n)
		return fmt.Sprintf("resources:\n  allocation: %s\nrun: %q\nrelease: keep\n", a.ID, run)
	}
	// Lines are shown while the job runs, not after it ended: the job
	// sleeps 8 s after its first lines. controld may not have recorded it
	// running yet (the node reports the start and publishes the lines on
	// their own paths): starting counts as not ended.
	running := func() {
		t.Helper()
		var jobs []api.Job
		dev.gpuaasJSON(t, &jobs, "job", "list", "--json")
		if len(jobs) == 0 || (jobs[0].State != api.JobRunning && jobs[0].State != api.JobStarting) {
			t.Fatalf("jobs %+v; want the newest starting or running while its first lines are shown", jobs)
		}
	}

	// gpuaas run streams: "first" arrives while the job waits.
	run := dev.start(t, spec(50), "run", "-f", "-")
	testutil.EventuallyWithin(t, time.Minute, "run to print the job's first lines while it runs", func() bool {
		return run.stdout.String() == "first\n" && strings.Contains(run.stderr.String(), "oops\n")
	})
	running()
	if code := run.wait(t); code != 0 {
		t.Fatalf("run exited %d: %s", code, run.stderr.String())
	}
	want := "first\n"
	for i := 1; i <= 50; i++ {
		want += fmt.Sprintf("n %d\n", i)
	}
	if got := run.stdout.String(); got != want {
		t.Fatalf("run printed %q; want the job's stdout, every line once in order", got)
	}
	var jobs []api.Job
	dev.gpuaasJSON(t, &jobs, "job", "list", "--json")
	lines := dev.logLines(t, "job", "logs", jobs[0].ID, "--json")
	checkSeqs(t, lines, 0, 52)
	// stdout and stderr are two pipes: which of "first" and "oops" the
	// node read first is not the job's to say.
	firstTwo := map[string]string{lines[0].Text: lines[0].Stream, lines[1].Text: lines[1].Stream}
	if firstTwo["first"] != api.LogStdout || firstTwo["oops"] != api.LogStderr || lines[51].Text != "n 50" {
		t.Fatalf("lines %+v, %+v, %+v; want first on stdout and oops on stderr, then n 50 last", lines[0], lines[1], lines[51])
	}

	// job logs -f, killed mid-stream, resumed with --after.
	r := dev.gpuaas(t, spec(30), "run", "-f", "-", "--detach")
	if r.code != 0 {
		t.Fatalf("run --detach exited %d: %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	f := dev.start(t, "", "job", "logs", "-f", id, "--json")
	testutil.EventuallyWithin(t, time.Minute, "job logs -f to print the first lines", func() bool {
		return strings.Count(f.stdout.String(), "\n") >= 2
	})
	running()
	if err := f.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	f.wait(t)
	first := parseLogLines(t, f.stdout.String())
	last := first[len(first)-1].Seq
	rest := dev.logLines(t, "job", "logs", "-f", id, "--json", "--after", fmt.Sprint(last))
	all := append(first, rest...)
	checkSeqs(t, all, 0, 32)
	if all[31].Text != "n 30" {
		t.Fatalf("last line %+v; want n 30", all[31])
	}
}

// proc is a gpuaas command running in the background.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
}

func (p *devProc) start(t *testing.T, stdin string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "GPUAAS_CONFIG_DIR="+p.configDir, "NO_COLOR=1")
	cmd.Stdin = strings.NewReader(stdin)
	pr := &proc{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = pr.stdout, pr.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(pr.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-pr.done })
	return pr
}

// wait returns the command's exit code, failing after a minute.
func (pr *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-pr.done:
		return pr.cmd.ProcessState.ExitCode()
	case <-time.After(time.Minute):
		t.Fatalf("%v still runs after a minute: %s", pr.cmd.Args, pr.stderr.String())
		return -1
	}
}

func (p *devProc) logLines(t *testing.T, args ...string) []api.LogLine {
	t.Helper()
	r := p.gpuaas(t, "", args...)
	if r.code != 0 {
		t.Fatalf("gpuaas %v exited %d: %s", args, r.code, r.stderr)
	}
	return parseLogLines(t, r.stdout)
}

func parseLogLines(t *testing.T, out string) []api.LogLine {
	t.Helper()
	var lines []api.LogLine
	for _, s := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if s == "" {
			continue
		}
		var l api.LogLine
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("job logs --json line %q: %v", s, err)
		}
		lines = append(lines, l)
	}
	return lines
}

// checkSeqs fails unless lines are numbered after+1 … after+n in order.
func checkSeqs(t *testing.T, lines []api.LogLine, after int64, n int) {
	t.Helper()
	if len(lines) != n {
		t.Fatalf("got %d lines; want %d: %+v", len(lines), n, lines)
	}
	for i, l := range lines {
		if l.Seq != after+int64(i+1) || l.Time.IsZero() {
			t.Fatalf("line %d: %+v; want seq %d with its time (nothing lost or repeated)", i, l, after+int64(i+1))
		}
	}
}
