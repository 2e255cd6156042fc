package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestJobSurvivesClientsGatewayAndControldRestarts is jobs' acceptance
// bullet "killing every client, restarting sshgate and one controld
// replica while the job runs does not stop it; `job wait ID` then exits
// with its code; `job logs ID` shows every line once, in order"
// (docs/jobs.md), on two controld replicas as separate processes: a job
// submitted with `ssh gateway run -f - --detach` prints a counter every
// 100 ms; its followers (`job logs -f` over SSH and locally, a local `job
// wait`) are SIGKILLed, then sshgate; then each controld replica in turn
// (the outbox relay's holder first) is SIGKILLed and started again while
// the other serves, the job seen running and printing each time. With
// the gateway started again, the job is told to end (a file it polls):
// `job wait` through the gateway and locally exit 7, the job's code; `job
// logs` numbers every counter line once, in order.
func TestJobSurvivesClientsGatewayAndControldRestarts(t *testing.T) {
	c := startFaultClusterWith(t, 2, 1)
	cl := c.client()
	startJobHost(t, c, cl, "ha-node")
	gw := startJobGateway(c)

	stop := filepath.Join(tempDir(t, "gpuaas-jobha-"), "stop")
	job := fmt.Sprintf(`name: ha
resources: {sku: h200-slice, gpus: 1}
run: |
  i=1; while [ ! -e %s ]; do echo "n $i"; i=$((i+1)); sleep 0.1; done; exit 7
`, stop)
	code, out, errOut := exitOf(gw.ssh(job, "run", "-f", "-", "--detach"))
	id := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(id, "j-") {
		t.Fatalf("ssh run --detach: exit %d %q %q; want a job id", code, out, errOut)
	}

	// Every client: a follower over SSH, one local, a local `job wait`.
	sshFollow := gw.ssh("", "job", "logs", "-f", id)
	var sshOut syncBuffer
	sshFollow.Stdout, sshFollow.Stderr = &sshOut, &sshOut
	localFollow, localWait := cliCmd("job", "logs", "-f", id), cliCmd("job", "wait", id)
	var localOut syncBuffer
	localFollow.Stdout = &localOut
	for _, cmd := range []interface{ Start() error }{sshFollow, localFollow, localWait} {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	c.waitFor("both followers to print counter lines", func() bool {
		return strings.Count(sshOut.String(), "\n") >= 3 && strings.Count(localOut.String(), "\n") >= 3
	})
	for _, p := range []*os.Process{sshFollow.Process, localFollow.Process, localWait.Process} {
		_ = p.Signal(syscall.SIGKILL)
	}
	_ = sshFollow.Wait()
	_ = localFollow.Wait()
	_ = localWait.Wait()
	if localWait.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the local `job wait` ended before it was killed: %v", localWait.ProcessState)
	}
	gw.proc.kill(t)

	// Each replica in turn, the relay's holder first: killed, the job
	// runs on and prints (seen through the other), started again.
	holder, other := c.relayHolder(1)
	for i, victim := range []*faultProc{holder, other} {
		before := jobLines(t, c, id)
		victim.kill(t)
		c.waitFor(fmt.Sprintf("the job to print on with %s killed", victim.name), func() bool {
			return jobLines(t, c, id) > before+5
		})
		startControldWith(c, fmt.Sprintf("controld-again-%d", i+1))
		var j api.Job
		if err := json.Unmarshal([]byte(c.cli("job", "get", id, "--json")), &j); err != nil {
			t.Fatal(err)
		}
		if j.State != api.JobRunning || j.Attempt != 1 {
			t.Fatalf("after %s was killed and a replica started again the job is %s (attempt %d); want running, attempt 1", victim.name, j.State, j.Attempt)
		}
	}
	gw.start()
	seen := jobLines(t, c, id)

	// Told to end: `job wait` through the restarted gateway and locally
	// exit with the job's code.
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := exitOf(gw.ssh("", "job", "wait", id)); code != 7 {
		t.Fatalf("ssh job wait through the restarted gateway: exit %d %q; want 7, the job's code", code, errOut)
	}
	if code, _, errOut := exitOf(cliCmd("job", "wait", id)); code != 7 {
		t.Fatalf("job wait: exit %d %q; want 7, the job's code", code, errOut)
	}
	lines := parseLogLines(t, c.cli("job", "logs", id, "--json"))
	if len(lines) < seen {
		t.Fatalf("%d lines at the end; %d were shown before", len(lines), seen)
	}
	checkSeqs(t, lines, 0, len(lines))
	for i, l := range lines {
		if l.Stream != api.LogStdout || l.Text != fmt.Sprintf("n %d", i+1) {
			t.Fatalf("line %d is %s %q; want stdout n %d (every counter line once, in order)", i+1, l.Stream, l.Text, i+1)
		}
	}
	var j api.Job
	if err := json.Unmarshal([]byte(c.cli("job", "get", id, "--json")), &j); err != nil {
		t.Fatal(err)
	}
	if j.State != api.JobFailed || j.ExitCode == nil || *j.ExitCode != 7 || j.Attempt != 1 {
		t.Fatalf("job %+v; want failed with exit 7 at attempt 1", j)
	}
	t.Logf("job %s: %d counter lines, every one once in order, across every client, sshgate and both controld replicas killed and restarted", id, len(lines))
}

// jobLines is how many lines the job's log holds now.
func jobLines(t *testing.T, c *faultCluster, id string) int {
	t.Helper()
	var lines int
	testutil.EventuallyWithin(t, time.Minute, "job logs to answer", func() bool {
		out, err := cliCmd("job", "logs", id, "--json").Output()
		if err != nil {
			return false
		}
		lines = strings.Count(string(out), "\n")
		return true
	})
	return lines
}
