package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// liveSSH is an OpenSSH session left running through the gateway.
type liveSSH struct {
	out  *syncBuffer
	done chan struct{}
	code int
}

// startSSH runs `ssh -tt args...` with a stdin that stays open until the
// test ends, as a user's terminal would, and waits for its first output.
func startSSH(t testing.TB, args ...string) *liveSSH {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "ssh", append([]string{"-o", "BatchMode=yes", "-tt"}, args...)...)
	s := &liveSSH{out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.done)
		_ = cmd.Wait()
		s.code = cmd.ProcessState.ExitCode()
	}()
	t.Cleanup(func() {
		stdin.Close()
		cancel()
		<-s.done
	})
	testutil.EventuallyWithin(t, time.Minute, "the session's first output", func() bool {
		return strings.Contains(s.out.String(), "before-")
	})
	return s
}

// wait returns ssh's exit code once it has exited.
func (s *liveSSH) wait(t testing.TB) int {
	t.Helper()
	select {
	case <-s.done:
		return s.code
	case <-time.After(time.Minute):
		t.Fatalf("ssh still running a minute later: %q", s.out.String())
		return 0
	}
}

// sessionRan returns the index entry of the session on alloc that ran
// command, as `gpuaas session list` shows it.
func sessionRan(t *testing.T, dev *devProc, alloc, command string) api.TerminalSession {
	t.Helper()
	r := dev.gpuaas(t, "", "session", "list", "--alloc", alloc, "--json", "id,command,state,ended_at,recording,gateway")
	if r.code != 0 {
		t.Fatalf("session list: exit %d %s", r.code, r.stderr)
	}
	var list []api.TerminalSession
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("session list: %v in %q", err, r.stdout)
	}
	for _, s := range list {
		if s.Command == command {
			return s
		}
	}
	t.Fatalf("no session ran %q: %+v", command, list)
	return api.TerminalSession{}
}

// TestDevStopEndsOpenSessionsAndCrashInterruptsThem is the regression
// test of stopping `gpuaas dev` (bench/README.md). Stopping it (SIGINT) under an open SSH
// session cut it with no message, logged "no responders for session.end",
// and left the session running with its recording lost. Now the client is
// told "gateway shutting down" and ssh exits 255, and after a restart the
// session is ended with its recording. Killing `gpuaas dev` (SIGKILL: no
// graceful stop at all) leaves the session running until the next start,
// which marks it interrupted with what was recorded. The stop time is
// logged, not asserted (bench/README.md has the figures).
func TestDevStopEndsOpenSessionsAndCrashInterruptsThem(t *testing.T) {
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	// Fixed ports, so the login and the SSH config stay right across
	// restarts.
	ports := []string{"--nats-port", strconv.Itoa(freePort(t)), "--ssh-port", strconv.Itoa(freePort(t))}
	dev := startDev(t, data, cfg, append([]string{"--password-file", pwFile}, ports...)...)
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login: exit %d %s", r.code, r.stderr)
	}
	r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h200-slice", "--gpus", "1", "--wait", "--json", "id", "--jq", ".id")
	alloc := lastLine(r.stdout)
	if r.code != 0 || alloc == "" {
		t.Fatalf("alloc create: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")

	// A graceful stop.
	const stopCommand = "echo before-stop; sleep 300"
	s := startSSH(t, "-F", sshConfig, alloc+"@localhost", stopCommand)
	start := time.Now()
	dev.stop(t)
	t.Logf("gpuaas dev stopped %s after SIGINT, with one open SSH session", time.Since(start).Round(time.Millisecond))
	if code := s.wait(t); code != 255 || !strings.Contains(s.out.String(), "gateway shutting down") {
		t.Errorf("ssh exited %d with %q; want 255 and the gateway saying it is shutting down", code, s.out.String())
	}
	if log := dev.stderr.String(); strings.Contains(log, "no responders") || strings.Contains(log, "close session index entry") {
		t.Errorf("the stop logged a session index failure:\n%s", log)
	}

	dev = startDev(t, data, cfg, ports...)
	ts := sessionRan(t, dev, alloc, stopCommand)
	if ts.State != api.SessionEnded || ts.EndedAt == nil || ts.Recording == "" {
		t.Fatalf("after a graceful stop the session is %+v; want ended with a recording", ts)
	}
	if r := dev.gpuaas(t, "", "session", "play", ts.ID, "--raw"); r.code != 0 || !strings.Contains(r.stdout, "before-stop") {
		t.Fatalf("session play --raw: exit %d %q %s", r.code, r.stdout, r.stderr)
	}

	// A crash, once the output has reached the gateway's recording spool
	// on disk (within a second).
	const crashCommand = "echo before-crash; sleep 0.5; echo still-running; sleep 300"
	s = startSSH(t, "-F", sshConfig, alloc+"@localhost", crashCommand)
	testutil.EventuallyWithin(t, time.Minute, "the session's output in the spool", func() bool {
		files, _ := filepath.Glob(filepath.Join(data, "sshgate", "recordings", "rec-*"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), "still-running") {
				return true
			}
		}
		return false
	})
	if err := dev.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-dev.done
	s.wait(t)

	dev = startDev(t, data, cfg, ports...)
	ts = sessionRan(t, dev, alloc, crashCommand)
	if ts.State != api.SessionInterrupted || ts.EndedAt == nil || ts.Recording == "" {
		t.Fatalf("after a crash and a restart the session is %+v; want interrupted with its recording", ts)
	}
	r = dev.gpuaas(t, "", "session", "play", ts.ID, "--raw")
	for _, want := range []string{"before-crash", "still-running"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("session play --raw: exit %d %q %s; want it to hold %q", r.code, r.stdout, r.stderr, want)
		}
	}
	if r := dev.gpuaas(t, "", "session", "list", "--alloc", alloc); r.code != 0 || !strings.Contains(r.stdout, "interrupted") {
		t.Errorf("session list: exit %d %q; want the interrupted session shown so", r.code, r.stdout)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// TestSSHGateSIGTERMEndsOpenSessions: the stand-alone gateway (`gpuaas
// sshgate`, as systemd runs it) stops on SIGTERM as `gpuaas dev` does on
// SIGINT: the open session is told and ssh exits 255, the process exits 0,
// and the session is ended with its recording.
func TestSSHGateSIGTERMEndsOpenSessions(t *testing.T) {
	dev, cfg := loggedInDev(t)
	r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h200-slice", "--gpus", "1", "--wait", "--json", "id", "--jq", ".id")
	alloc := lastLine(r.stdout)
	if r.code != 0 || alloc == "" {
		t.Fatalf("alloc create: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	nkey := filepath.Join(cfg, "gw.nk")
	if r := dev.gpuaas(t, "", "ops", "nats-identity", "add", "--kind", "gateway", "--name", "gw-standalone", "--out", nkey); r.code != 0 {
		t.Fatalf("nats-identity add: exit %d %s", r.code, r.stderr)
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

	port := strconv.Itoa(freePort(t))
	state := tempDir(t, "gpuaas-e2e-gw-")
	gw := exec.Command(binary, "sshgate", "--listen", "127.0.0.1:"+port, "--server", url, "--nkey", nkey,
		"--host-key", filepath.Join(state, "host_ed25519_key"), "--principal", "localhost", "--name", "gw-standalone",
		"--recording-dir", filepath.Join(state, "recordings"))
	gwLog := &syncBuffer{}
	gw.Stdout, gw.Stderr = gwLog, gwLog
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	gwDone := make(chan error, 1)
	go func() { gwDone <- gw.Wait() }()
	t.Cleanup(func() {
		if gw.ProcessState == nil {
			_ = gw.Process.Kill()
			<-gwDone
		}
		if t.Failed() {
			t.Logf("gpuaas sshgate's output:\n%s", gwLog.String())
		}
	})
	testutil.EventuallyWithin(t, time.Minute, "gpuaas sshgate to serve", func() bool {
		return strings.Contains(gwLog.String(), "serving ssh")
	})

	const command = "echo before-sigterm; sleep 300"
	s := startSSH(t, "-F", filepath.Join(cfg, "ssh", "dev", "config"), "-p", port,
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", alloc+"@localhost", command)
	if err := gw.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-gwDone:
		if err != nil {
			t.Errorf("gpuaas sshgate exited with %v after SIGTERM; want 0", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("gpuaas sshgate still running a minute after SIGTERM")
	}
	if code := s.wait(t); code != 255 || !strings.Contains(s.out.String(), "gateway shutting down") {
		t.Errorf("ssh exited %d with %q; want 255 and the gateway saying it is shutting down", code, s.out.String())
	}
	ts := sessionRan(t, dev, alloc, command)
	if ts.State != api.SessionEnded || ts.EndedAt == nil || ts.Recording == "" || ts.Gateway != "gw-standalone" {
		t.Fatalf("after SIGTERM the session is %+v; want ended on gw-standalone with a recording", ts)
	}
	if r := dev.gpuaas(t, "", "session", "play", ts.ID, "--raw"); r.code != 0 || !strings.Contains(r.stdout, "before-sigterm") {
		t.Fatalf("session play --raw: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
}

// BenchmarkDevStop measures how long `gpuaas dev` (built without -race)
// takes to exit after SIGINT with one open SSH session, which it tells and
// ends first: the goal is under 5 s (bench/README.md; it took 18.6 s). One op
// is one stop; starting the platform, the login, the allocation and the
// session are outside the timer. Run: go test ./e2e -run '^$' -bench
// DevStop -benchtime=3x
func BenchmarkDevStop(b *testing.B) {
	bin := benchBinary(b)
	data, cfg := benchTempDir(b, "gpuaas-bench-data-"), benchTempDir(b, "gpuaas-bench-cfg-")
	pw := filepath.Join(cfg, "pw")
	if err := os.WriteFile(pw, []byte(devPassword+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	ports := []string{"--nats-port", strconv.Itoa(freePort(b)), "--ssh-port", strconv.Itoa(freePort(b)),
		"--password-file", pw, "--log-level", "warn"}
	alloc := ""
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dev := startDevBin(b, bin, data, cfg, ports...)
		if alloc == "" {
			if r := dev.gpuaas(b, devPassword, "login", "--password-stdin"); r.code != 0 {
				b.Fatalf("login: exit %d %s", r.code, r.stderr)
			}
			r := dev.gpuaas(b, "", "alloc", "create", "--sku", "h200-slice", "--gpus", "1", "--wait", "--json", "id", "--jq", ".id")
			if alloc = lastLine(r.stdout); r.code != 0 || alloc == "" {
				b.Fatalf("alloc create: exit %d %q\n%s", r.code, r.stdout, r.stderr)
			}
		}
		s := startSSH(b, "-F", filepath.Join(cfg, "ssh", "dev", "config"), alloc+"@localhost", "echo before-stop; sleep 300")
		b.StartTimer()
		dev.stop(b)
		b.StopTimer()
		if code := s.wait(b); code != 255 {
			b.Fatalf("ssh exited %d; want 255: %q", code, s.out.String())
		}
	}
}
