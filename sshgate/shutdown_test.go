package sshgate

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/devenv/controlplane"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// lockedBuffer is a bytes.Buffer a process writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// openSession is an interactive OpenSSH session left running.
type openSession struct {
	cmd         *exec.Cmd
	stdin       io.WriteCloser // kept open: the user has not typed EOF
	out, errOut lockedBuffer
	done        chan struct{}
	code        int
}

// start runs ssh with args and leaves it running.
func (o *openSSH) start(args ...string) *openSession {
	o.t.Helper()
	s := &openSession{done: make(chan struct{})}
	s.cmd = exec.Command("ssh", append(append(append([]string{}, o.args...), "-p", o.port), args...)...)
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.errOut
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		o.t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		o.t.Fatal(err)
	}
	go func() {
		defer close(s.done)
		_ = s.cmd.Wait()
		s.code = s.cmd.ProcessState.ExitCode()
	}()
	o.t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
	return s
}

// waitOutput waits until the session's stdout holds want.
func (s *openSession) waitOutput(t *testing.T, want string) {
	t.Helper()
	testutil.Eventually(t, fmt.Sprintf("%q on the session's output", want), func() bool {
		return strings.Contains(s.out.String(), want)
	})
}

// wait waits for ssh to exit and returns its exit code.
func (s *openSession) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.done:
		return s.code
	case <-time.After(30 * time.Second):
		t.Fatalf("ssh still running 30s later; stdout %q, stderr %q", s.out.String(), s.errOut.String())
		return 0
	}
}

// sessionOf returns the index entry of the session that ran command.
func (e *env) sessionOf(t *testing.T, command string) api.TerminalSession {
	t.Helper()
	list, err := e.admin.SessionList(context.Background(), api.SessionListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range list.Sessions {
		if ts.Command == command {
			return ts
		}
	}
	t.Fatalf("no session ran %q in %+v", command, list.Sessions)
	return api.TerminalSession{}
}

// recordingOf reads a session's recording as its user would.
func recordingOf(t *testing.T, u *user, id string) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := u.client.SessionRecording(context.Background(), id, &b); err != nil {
		t.Fatalf("recording of %s: %v", id, err)
	}
	return b.String()
}

// TestGatewayShutdownTellsOpenSessionsAndEndsThem is the regression test
// of stopping the gateway under an open session: the session was cut with
// no message and its index entry stayed running. Now OpenSSH's user sees
// why it ends and ssh exits 255, and by the time Run returns the session
// is ended (not running) with its recording uploaded.
func TestGatewayShutdownTellsOpenSessionsAndEndsThem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.newUser()
	alloc := e.addAlloc(u)
	o := newOpenSSH(t, e, u)
	const command = "echo session-started; sleep 120"
	s := o.start("-tt", alloc+"@127.0.0.1", command)
	s.waitOutput(t, "session-started")

	e.stop()
	if code := s.wait(t); code != exitGatewayError {
		t.Errorf("ssh exited %d; want %d", code, exitGatewayError)
	}
	if got := s.errOut.String() + s.out.String(); !strings.Contains(got, "gateway shutting down") {
		t.Errorf("the client saw %q; want it told the gateway is shutting down", got)
	}
	ts := e.sessionOf(t, command)
	if ts.State != api.SessionEnded || ts.EndedAt == nil || ts.Recording != ts.ID {
		t.Fatalf("index entry %+v; want ended with its recording", ts)
	}
	if rec := recordingOf(t, u, ts.ID); !strings.Contains(rec, "session-started") {
		t.Errorf("recording %q; want the session's output", rec)
	}
	if files, _ := core.Spooled(e.gw.cfg.RecordingDir); len(files) != 0 {
		t.Errorf("spool holds %v after a clean stop; want nothing", files)
	}
}

// crashGatewayEnv makes the test binary a gateway (crashGatewayMain) that
// TestGatewayCrashLeavesSessionsInterruptedWithRecording kills.
const crashGatewayEnv = "GPUAAS_TEST_CRASH_GATEWAY"

// crashGatewaySpec is what the gateway process needs.
type crashGatewaySpec struct {
	NATSURL string `json:"nats_url"`
	Seed    []byte `json:"seed"` // the registered gateway key's
	Dir     string `json:"dir"`
	Name    string `json:"name"`
}

// crashGatewayMain runs a gateway until it is killed, printing its address
// once it serves.
func crashGatewayMain(spec string) int {
	var s crashGatewaySpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	key, err := bus.KeyFromEd25519Seed(s.Seed)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	nc, client, err := controlplane.ConnectGateway(s.NATSURL, bus.TLS{}, key)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer nc.Close()
	_, hostKey, _ := ed25519.GenerateKey(nil)
	g, err := New(Config{Listen: "127.0.0.1:0", HostKey: hostKey, GatewayKey: ed25519.NewKeyFromSeed(s.Seed),
		Client: client, RecordingDir: s.Dir, Name: s.Name, NodeTransport: TransportSSH, // testHostd's
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	failed := make(chan error, 1)
	go func() { failed <- g.Run(context.Background()) }()
	select {
	case <-g.Ready():
		fmt.Printf("addr=%s\n", g.Addr())
	case err := <-failed:
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintln(os.Stderr, <-failed)
	return 1
}

// startCrashGateway runs a gateway in a process of its own and returns its
// address and the process, for the test to kill.
func startCrashGateway(t *testing.T, spec crashGatewaySpec) (string, *exec.Cmd) {
	t.Helper()
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashGatewayEnv+"="+string(b))
	var logs lockedBuffer
	cmd.Stderr = &logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("the gateway process's log:\n%s", logs.String())
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "addr="); ok {
				addr <- a
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case a := <-addr:
		return a, cmd
	case <-exited:
		t.Fatal("the gateway process exited before it served")
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway process did not serve within 30s")
	}
	return "", nil
}

// TestGatewayCrashLeavesSessionsInterruptedWithRecording is the regression
// test of a gateway that dies without stopping (SIGKILL): the session
// stayed running forever and its recording was lost. Now the recording
// waits in the gateway's spool, and when the gateway starts again, before
// it serves, the session is ended as interrupted with what was recorded.
func TestGatewayCrashLeavesSessionsInterruptedWithRecording(t *testing.T) {
	t.Parallel()
	sshtest.NeedOpenSSH(t, "ssh")
	e := newEnv(t, envOptions{})
	u := e.newUser()
	alloc := e.addAlloc(u)
	const name = "gw-crash"
	client, key := e.ctl.GatewayVia(t, name, nil)
	spool := t.TempDir()
	addr, proc := startCrashGateway(t, crashGatewaySpec{NATSURL: e.ctl.NATSURL, Seed: key.Seed(), Dir: spool, Name: name})

	o := newOpenSSHFor(t, addr, u, e.hostCA)
	const command = "echo before-crash; sleep 0.5; echo still-running; sleep 120"
	s := o.start("-tt", alloc+"@127.0.0.1", command)
	s.waitOutput(t, "still-running")
	// The output reaches the spool file within spoolFlush; the crash comes
	// after.
	testutil.Eventually(t, "the output in the spool file", func() bool {
		files, _ := filepath.Glob(core.SpoolPath(spool, "*"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte("still-running")) {
				return true
			}
		}
		return false
	})
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if code := s.wait(t); code != 255 {
		t.Errorf("ssh exited %d after the gateway died; want 255", code)
	}
	ts := e.sessionOf(t, command)
	if ts.State != api.SessionRunning {
		t.Fatalf("index entry after the crash %+v; want still running", ts)
	}
	if files, err := core.Spooled(spool); err != nil || len(files) != 1 || files[0] != ts.ID {
		t.Fatalf("spool after the crash holds %v (%v); want the recording of %s", files, err, ts.ID)
	}

	// The gateway starts again, with its name and its spool.
	g, err := New(Config{Listen: "127.0.0.1:0", HostKey: sshtest.NewKey(t), GatewayKey: key, Client: client,
		RecordingDir: spool, Name: name, NodeTransport: TransportSSH, Log: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway Run returned %v; want nil", err)
		}
	})
	select {
	case <-g.Ready():
	case err := <-done:
		t.Fatalf("gateway Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("gateway not ready after 30s")
	}
	ts = e.sessionOf(t, command)
	if ts.State != api.SessionInterrupted || ts.EndedAt == nil || ts.Recording != ts.ID {
		t.Fatalf("index entry after the restart %+v; want interrupted with its recording", ts)
	}
	rec := recordingOf(t, u, ts.ID)
	for _, want := range []string{"before-crash", "still-running", "the gateway stopped without ending the session"} {
		if !strings.Contains(rec, want) {
			t.Errorf("recovered recording %q; want it to hold %q", rec, want)
		}
	}
	if c := parseCast(t, []byte(rec)); !strings.Contains(c.output, "before-crash") {
		t.Errorf("recovered recording is not a cast with the output: %+v", c)
	}
	if files, _ := core.Spooled(spool); len(files) != 0 {
		t.Errorf("spool holds %v after the recovery; want nothing", files)
	}
}
