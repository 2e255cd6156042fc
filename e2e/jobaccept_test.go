package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestJobAcceptanceInDev covers the bullets of jobs' acceptance (docs/jobs.md)
// that had no test through the built binary and `gpuaas dev`:
//   - `run: python3 -c 'print(...)'` prints its output and exits 0 (python3
//     found on the job's PATH, as the renter);
//   - `job cancel` of a job that ignores SIGTERM ends it with SIGKILL after
//     the grace period: `job wait` exits 137, the job is cancelled with
//     signal SIGKILL.
func TestJobAcceptanceInDev(t *testing.T) {
	dev, _ := loggedInDev(t)
	a := dev.createActive(t, "--sku", "h100-baremetal", "--gpus", "8")
	spec := func(run string) string {
		return fmt.Sprintf("resources:\n  allocation: %s\nrun: %q\nrelease: keep\n", a.ID, run)
	}

	// python3 runs in the job's environment and its output is the job's.
	r := dev.gpuaas(t, spec(`python3 -c 'import sys; print("py", sys.version_info[0], 6*7)'`), "run", "-f", "-")
	if r.code != 0 || r.stdout != "py 3 42\n" {
		t.Errorf("run python3: exit %d %q %q; want 0 printing \"py 3 42\"", r.code, r.stdout, r.stderr)
	}

	// A job that ignores SIGTERM: cancel sends SIGTERM, then SIGKILL after
	// the grace period (controld's job StopGrace, 10 s by default).
	r = dev.gpuaas(t, spec(`trap '' TERM; echo armed; sleep 600`), "run", "-f", "-", "--detach")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(id, "j-") {
		t.Fatalf("run --detach: exit %d %q %q; want a job id", r.code, r.stdout, r.stderr)
	}
	// "armed" is printed after the trap is set: cancelling before it would
	// kill the job with SIGTERM and prove nothing.
	testutil.EventuallyWithin(t, time.Minute, "the job to set its trap", func() bool {
		r := dev.gpuaas(t, "", "job", "logs", id)
		return r.code == 0 && r.stdout == "armed\n"
	})
	if r := dev.gpuaas(t, "", "job", "cancel", id); r.code != 0 {
		t.Fatalf("job cancel: exit %d %q", r.code, r.stderr)
	}
	w := dev.start(t, "", "job", "wait", id)
	if code := w.wait(t); code != 128+9 || !strings.Contains(w.stderr.String(), "cancelled") {
		t.Errorf("job wait of a job ignoring SIGTERM, cancelled: exit %d %q; want 137 (SIGKILL), cancelled", code, w.stderr.String())
	}
	var j api.Job
	dev.gpuaasJSON(t, &j, "job", "get", id, "--json")
	if j.State != api.JobCancelled || j.Signal != "SIGKILL" || j.ExitCode == nil || *j.ExitCode != 137 || j.EndedAt == nil {
		t.Fatalf("cancelled job %+v; want cancelled, signal SIGKILL, exit 137", j)
	}
	// SIGKILL came after the grace period, not with the SIGTERM.
	if d := j.EndedAt.Sub(*j.StartedAt); d < 10*time.Second {
		t.Errorf("job ended %v after it started; want at least the 10 s grace after SIGTERM", d)
	}
	var alloc api.Allocation
	dev.gpuaasJSON(t, &alloc, "alloc", "get", a.ID, "--json")
	if alloc.State != api.AllocActive {
		t.Errorf("after cancelling a release: keep job the allocation is %s; want active", alloc.State)
	}
}

// TestJobSurvivesSSHGateRestart: a job started with `ssh gateway run -f -
// --detach` (a stand-alone `gpuaas sshgate`, as systemd runs it) keeps
// running when its follower over SSH is killed and the gateway is killed
// (SIGKILL) and started again; `job wait` through the new gateway exits
// with the job's code and `job logs` shows every counter line once, in
// order.
func TestJobSurvivesSSHGateRestart(t *testing.T) {
	dev, cfg := loggedInDev(t)
	a := dev.createActive(t, "--sku", "h100-baremetal", "--gpus", "8")
	if r := dev.gpuaas(t, "", "ssh-config"); r.code != 0 {
		t.Fatalf("ssh-config: exit %d %s", r.code, r.stderr)
	}
	gw := startGateway(t, dev, cfg)
	ssh := func(stdin string, args ...string) *exec.Cmd {
		base := []string{"-F", filepath.Join(cfg, "ssh", "dev", "config"), "-p", gw.port, "-o", "BatchMode=yes",
			"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "gpuaas-dev"}
		c := exec.Command("ssh", append(base, args...)...)
		c.Stdin = strings.NewReader(stdin)
		return c
	}

	const n = 40
	run := fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo "n $i"; i=$((i+1)); sleep 0.5; done; exit 5`, n)
	out, err := ssh(fmt.Sprintf("resources:\n  allocation: %s\nrun: %q\nrelease: keep\n", a.ID, run), "run", "-f", "-", "--detach").Output()
	id := strings.TrimSpace(string(out))
	if err != nil || !strings.HasPrefix(id, "j-") {
		t.Fatalf("ssh run --detach: %v %q; want a job id", err, out)
	}
	// A follower over SSH, and one local: every client is killed.
	follow := ssh("", "job", "logs", "-f", id)
	var followOut syncBuffer
	follow.Stdout = &followOut
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	local := dev.start(t, "", "job", "wait", id)
	testutil.EventuallyWithin(t, time.Minute, "the follower over SSH to print counter lines", func() bool {
		return strings.Count(followOut.String(), "\n") >= 3
	})
	_ = follow.Process.Kill()
	_ = follow.Wait()
	_ = local.cmd.Process.Kill()
	local.wait(t)
	gw.kill(t)
	var j api.Job
	dev.gpuaasJSON(t, &j, "job", "get", id, "--json")
	if j.State != api.JobRunning {
		t.Fatalf("with every client and the gateway gone the job is %s; want running", j.State)
	}
	gw = startGateway(t, dev, cfg, gw.port)

	wait := ssh("", "job", "wait", id)
	var waitErr syncBuffer
	wait.Stderr = &waitErr
	if err := wait.Run(); wait.ProcessState == nil || wait.ProcessState.ExitCode() != 5 {
		t.Fatalf("ssh job wait through the restarted gateway: %v %q; want exit 5, the job's code", err, waitErr.String())
	}
	lines := dev.logLines(t, "job", "logs", id, "--json")
	checkSeqs(t, lines, 0, n)
	for i, l := range lines {
		if l.Text != fmt.Sprintf("n %d", i+1) {
			t.Fatalf("line %d is %q; want n %d (every counter line once, in order)", i+1, l.Text, i+1)
		}
	}
	dev.gpuaasJSON(t, &j, "job", "get", id, "--json")
	if j.State != api.JobFailed || j.ExitCode == nil || *j.ExitCode != 5 || j.Attempt != 1 {
		t.Fatalf("job %+v; want failed with exit 5 at attempt 1", j)
	}
}

// gateway is a stand-alone `gpuaas sshgate` on loopback.
type gateway struct {
	cmd  *exec.Cmd
	port string
	done chan struct{}
}

// startGateway starts `gpuaas sshgate` with an identity from dev, on port
// (a free one when none is given), keeping its host key and recordings in
// cfg so that a restart is the same gateway.
func startGateway(t *testing.T, dev *devProc, cfg string, port ...string) *gateway {
	t.Helper()
	nkey := filepath.Join(cfg, "gw.nk")
	if len(port) == 0 {
		if r := dev.gpuaas(t, "", "ops", "nats-identity", "add", "--kind", "gateway", "--name", "gw-jobs", "--out", nkey); r.code != 0 {
			t.Fatalf("nats-identity add: exit %d %s", r.code, r.stderr)
		}
		port = []string{strconv.Itoa(freePort(t))}
	}
	url := ""
	for _, line := range strings.Split(dev.stderr.String(), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "server" {
			url = f[1]
		}
	}
	if url == "" {
		t.Fatalf("no server URL in the banner:\n%s", dev.stderr.String())
	}
	cmd := exec.Command(binary, "sshgate", "--listen", "127.0.0.1:"+port[0], "--server", url, "--nkey", nkey,
		"--host-key", filepath.Join(cfg, "gw_host_ed25519_key"), "--principal", "localhost", "--name", "gw-jobs",
		"--recording-dir", filepath.Join(cfg, "gw-recordings"))
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &gateway{cmd: cmd, port: port[0], done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-g.done
		if t.Failed() {
			t.Logf("gpuaas sshgate's output:\n%s", log.String())
		}
	})
	testutil.EventuallyWithin(t, time.Minute, "gpuaas sshgate to serve", func() bool {
		return strings.Contains(log.String(), "serving ssh")
	})
	return g
}

// kill ends the gateway with SIGKILL, as a crash would.
func (g *gateway) kill(t *testing.T) {
	t.Helper()
	if err := g.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-g.done
}

// TestJobLogCutAtTheBoundInDev: a job printing 80 MB through `gpuaas dev`
// (whose controld keeps the default bound of one job's log, 64 MiB,
// --job-log-max-bytes) ends 0 with its log cut at the bound: its lines up to the bound, in
// order (gaps only where a marker says lines were dropped), numbered once,
// then the cut marker naming the bound, and a marker counting the bytes
// not kept.
func TestJobLogCutAtTheBoundInDev(t *testing.T) {
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--log-level", "warn")
	if r := dev.gpuaas(t, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login exited %d: %s", r.code, r.stderr)
	}
	a := dev.createActive(t, "--sku", "h100-baremetal", "--gpus", "8")
	const bound, lines = 64 << 20, 20000 // 20000 lines of 4 KB: 80 MB
	run := fmt.Sprintf(`l=$(head -c 3990 /dev/zero | tr '\0' x); i=1; while [ $i -le %d ]; do printf '%%05d %%s\n' $i "$l"; i=$((i+1)); done`, lines)
	r := dev.gpuaas(t, fmt.Sprintf("resources:\n  allocation: %s\nrun: %q\nrelease: keep\n", a.ID, run), "run", "-f", "-", "--detach")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(id, "j-") {
		t.Fatalf("run --detach: exit %d %q %q; want a job id", r.code, r.stdout, r.stderr)
	}
	w := dev.start(t, "", "job", "wait", id)
	if code := w.wait(t); code != 0 {
		t.Fatalf("job wait: exit %d %q; want 0", code, w.stderr.String())
	}
	// 3997 bytes a line: the bound keeps the first 16790 or so. Lines the
	// node could not publish as fast as the job printed them are dropped
	// with a marker where they were (docs/jobs.md "Logs"): counted against
	// the bound all the same.
	all := dev.logLines(t, "job", "logs", id, "--json")
	checkSeqs(t, all, 0, len(all))
	if len(all) < 3 {
		t.Fatalf("%d lines; want the job's lines, then the markers", len(all))
	}
	var kept int64
	gap := false // a drop marker since the last line of the job's
	last := 0    // index of the job's last line
	for i, l := range all {
		if l.Stream != api.LogStdout {
			gap = gap || strings.Contains(l.Text, "of output dropped here")
			continue
		}
		n, err := strconv.ParseInt(strings.SplitN(l.Text, " ", 2)[0], 10, 64)
		if err != nil || n <= kept || (n != kept+1 && !gap) {
			t.Fatalf("line %d: %.20q after the job's line %d; want the next, or a later one after a drop marker, ", l.Seq, l.Text, kept)
		}
		kept, gap, last = n, false, i
	}
	// After the job's last line kept: the cut marker (a drop marker may
	// follow it), and last the count of bytes not kept.
	markers := all[last+1:]
	cutAt := slices.IndexFunc(markers, func(l api.LogLine) bool {
		return l.Stream == api.LogMarker && strings.Contains(l.Text, fmt.Sprintf("output cut: this log reached its bound of %d bytes", bound))
	})
	if end := all[len(all)-1]; cutAt < 0 || end.Stream != api.LogMarker ||
		!strings.Contains(end.Text, fmt.Sprintf("past the bound of %d bytes were not kept", bound)) {
		t.Fatalf("lines after the job's last: %+v; want the cut marker and, last, the count of bytes not kept", markers)
	}
	// Lines dropped just before the cut (the node's buffer was full) count
	// toward the bound as kept output does (logstream's pump), so the
	// job's last line shown can sit below it by what a drop marker after
	// it names.
	reached := kept
	for _, m := range markers {
		var n, b int64
		if _, err := fmt.Sscanf(m.Text, "[gpuaas] %d lines (%d bytes) of output dropped here", &n, &b); err == nil {
			reached += n
		}
	}
	if kept*3996 > bound || reached*3997 < bound-8192 || kept >= lines {
		t.Fatalf("%d lines kept (%d bytes; %d with the lines dropped just before the cut); want the job's output cut at the bound of %d bytes",
			kept, kept*3997, reached*3997, bound)
	}
}
