package sshgate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/recstore"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestExec: commands run on the node as the allocation's POSIX user; their
// output, stderr and exit status come back; stdin goes through with its EOF.
func TestExec(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.newUser()
	alloc := e.addAlloc(u)
	c := e.dial(u, alloc)

	tests := []struct {
		name       string
		command    string
		stdin      string
		wantOut    string
		wantErr    string
		wantStatus int
	}{
		{name: "exit status", command: "echo hi; exit 3", wantOut: "hi\n", wantStatus: 3},
		{name: "stderr", command: "echo oops >&2; exit 1", wantErr: "oops\n", wantStatus: 1},
		{name: "stdin and its EOF", command: "tr a-z A-Z", stdin: "hello\nworld\n", wantOut: "HELLO\nWORLD\n"},
		{name: "binary bytes", command: `printf '\000\377\n'`, wantOut: "\x00\xff\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := c.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var out, errOut bytes.Buffer
			s.Stdout, s.Stderr, s.Stdin = &out, &errOut, strings.NewReader(tt.stdin)
			err = s.Run(tt.command)
			status := 0
			var exitErr *gossh.ExitError
			if errors.As(err, &exitErr) {
				status = exitErr.ExitStatus()
			} else if err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.wantOut || errOut.String() != tt.wantErr || status != tt.wantStatus {
				t.Fatalf("got stdout %q stderr %q status %d; want %q %q %d", out.String(), errOut.String(), status,
					tt.wantOut, tt.wantErr, tt.wantStatus)
			}
		})
	}
	// All sessions of the connection share one authorization and one link
	// to the node.
	if got := e.authorizedUsers(); !slices.Equal(got, []string{u.id}) {
		t.Fatalf("got %d gate.authorize calls (%q); want 1 per connection, for %s", len(got), got, u.id)
	}
	ts := e.endedSession(t, api.SessionExec, "")
	if ts.UserID != u.id || ts.AllocationID != alloc || ts.ExitStatus == nil || ts.Recording != "" {
		t.Fatalf("got index entry %+v; want user %s, allocation %s, an exit status, no recording", ts, u.id, alloc)
	}
}

// TestSessionEnv: only the locale (and TERM without a PTY) reaches the
// node; the user's session token, which command mode reads, never does.
func TestSessionEnv(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.newUser()
	c := e.dial(u, e.addAlloc(u))
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for k, v := range map[string]string{"LANG": "C.UTF-8", "LC_ALL": "C", "TERM": "xterm", "GPUAAS_TOKEN": "secret", "LD_PRELOAD": "/x.so"} {
		if err := s.Setenv(k, v); err != nil {
			t.Fatalf("setenv %s: %v", k, err)
		}
	}
	if out, err := s.Output("true"); err != nil {
		t.Fatalf("run: %v (%s)", err, out)
	}
	got := slices.Sorted(slices.Values(e.hostd.lastEnv()))
	want := []string{"LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm"}
	if !slices.Equal(got, want) {
		t.Fatalf("got node environment %q; want %q", got, want)
	}
}

// TestSignals: the client's signals reach the command, and a command
// killed by a signal is reported to the client as that signal.
func TestSignals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.newUser()
	c := e.dial(u, e.addAlloc(u))

	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out sshtest.Buffer
	s.Stdout = &out
	if err := s.Start(`trap 'echo got-int; exit 7' INT; echo ready; while :; do sleep 0.05; done`); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the command ready", func() bool { return strings.Contains(out.String(), "ready") })
	if err := s.Signal(gossh.SIGINT); err != nil {
		t.Fatal(err)
	}
	var exitErr *gossh.ExitError
	if err := s.Wait(); !errors.As(err, &exitErr) || exitErr.ExitStatus() != 7 || !strings.Contains(out.String(), "got-int") {
		t.Fatalf("got %v, output %q; want exit status 7 after the trap ran", err, out.String())
	}

	s2, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	err = s2.Run("kill -TERM $$")
	if !errors.As(err, &exitErr) || exitErr.Signal() != "TERM" {
		t.Fatalf("got %v; want the exit signal TERM", err)
	}
}

// TestPTYSessionRecorded: a shell with a PTY, a window change, and the
// asciicast recording in the object store holding exactly the output the
// client received, indexed with its exit status.
func TestPTYSessionRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.newUser()
	alloc := e.addAlloc(u)
	c := e.dial(u, alloc)

	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RequestPty("xterm-256color", 24, 80, gossh.TerminalModes{gossh.ECHO: 0}); err != nil {
		t.Fatal(err)
	}
	stdin, err := s.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out sshtest.Buffer
	s.Stdout = &out
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	send := func(line string) {
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send("stty size; echo TERM=$TERM; printf 'h\\303\\251llo \\342\\234\\223\\n'")
	testutil.Eventually(t, "the first answers", func() bool { return strings.Contains(out.String(), "✓") })
	if err := s.WindowChange(40, 120); err != nil {
		t.Fatal(err)
	}
	// The resize races the next command on the node; ask until it shows.
	testutil.Eventually(t, "the new size", func() bool {
		send("stty size")
		time.Sleep(50 * time.Millisecond)
		return strings.Contains(out.String(), "40 120")
	})
	send("exit 5")
	var exitErr *gossh.ExitError
	if err := s.Wait(); !errors.As(err, &exitErr) || exitErr.ExitStatus() != 5 {
		t.Fatalf("got %v; want exit status 5", err)
	}
	seen := out.String()
	for _, want := range []string{"24 80", "TERM=xterm-256color", "héllo ✓"} {
		if !strings.Contains(seen, want) {
			t.Fatalf("got output %q; want it to contain %q", seen, want)
		}
	}

	ts := e.endedSession(t, api.SessionShell, "")
	if ts.Recording != ts.ID || ts.ExitStatus == nil || *ts.ExitStatus != 5 || ts.Bytes < int64(len(seen)) {
		t.Fatalf("got index entry %+v; want recording %s, exit status 5, bytes >= %d", ts, ts.ID, len(seen))
	}
	cast := fetchRecording(t, e, ts.Recording)
	if cast.header.Version != 2 || cast.header.Width != 80 || cast.header.Height != 24 || cast.header.Env["TERM"] != "xterm-256color" {
		t.Fatalf("got header %+v; want version 2, 80x24, TERM xterm-256color", cast.header)
	}
	if cast.output != seen {
		t.Fatalf("recording output differs from what the client saw:\n got %q\nwant %q", cast.output, seen)
	}
	if !slices.Contains(cast.resizes, "120x40") {
		t.Fatalf("got resize events %q; want 120x40", cast.resizes)
	}
	if !slices.IsSortedFunc(cast.times, func(a, b float64) int { return int(a*1e6 - b*1e6) }) {
		t.Fatalf("got event times %v; want them in order", cast.times)
	}
}

// asciicast is a parsed recording.
type asciicast struct {
	header struct {
		Version   int               `json:"version"`
		Width     int               `json:"width"`
		Height    int               `json:"height"`
		Timestamp int64             `json:"timestamp"`
		Env       map[string]string `json:"env"`
	}
	output  string
	resizes []string
	markers []string
	times   []float64
}

func fetchRecording(t *testing.T, e *env, name string) asciicast {
	t.Helper()
	// Read as controld does: the gateway may write recordings, not read them.
	js, err := jetstream.New(e.ctl.NC)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	meta, err := recstore.Open(ctx, js, name)
	if err != nil {
		t.Fatalf("recording %s: %v", name, err)
	}
	data, err := recstore.ReadAt(ctx, js, meta, 0, int(meta.Size))
	if err != nil {
		t.Fatalf("get recording %s: %v", name, err)
	}
	return parseCast(t, data)
}

func parseCast(t *testing.T, data []byte) asciicast {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	var c asciicast
	if err := json.Unmarshal([]byte(lines[0]), &c.header); err != nil {
		t.Fatalf("header %q: %v", lines[0], err)
	}
	var out strings.Builder
	for _, l := range lines[1:] {
		var ev []any
		if err := json.Unmarshal([]byte(l), &ev); err != nil || len(ev) != 3 {
			t.Fatalf("event %q: %v", l, err)
		}
		at, _ := ev[0].(float64)
		code, _ := ev[1].(string)
		data, _ := ev[2].(string)
		c.times = append(c.times, at)
		switch code {
		case "o":
			out.WriteString(data)
		case "r":
			c.resizes = append(c.resizes, data)
		case "m":
			c.markers = append(c.markers, data)
		default:
			t.Fatalf("event %q: unknown code", l)
		}
	}
	c.output = out.String()
	return c
}

// TestSFTP: the sftp subsystem through the gateway, bytes intact both ways.
func TestSFTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.newUser()
	c := e.dial(u, e.addAlloc(u))
	client, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	payload := make([]byte, 3<<20+17)
	for i := range payload {
		payload[i] = byte(i*7 + i>>10)
	}
	path := filepath.Join(t.TempDir(), "blob")
	f, err := client.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(bytes.NewReader(payload)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := client.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var back bytes.Buffer
	if _, err := g.WriteTo(&back); err != nil {
		t.Fatal(err)
	}
	g.Close()
	if !bytes.Equal(back.Bytes(), payload) {
		t.Fatalf("got %d bytes back; want the %d bytes written", back.Len(), len(payload))
	}
	client.Close()
	if ts := e.endedSession(t, api.SessionSFTP, ""); ts.Command != "sftp" || ts.Bytes < int64(2*len(payload)) {
		t.Fatalf("got index entry %+v; want command sftp and at least %d bytes", ts, 2*len(payload))
	}
}

// TestDirectTCPIP: ssh -L reaches a port on the target through the node.
func TestDirectTCPIP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.newUser()
	c := e.dial(u, e.addAlloc(u))
	echo := sshtest.ListenEcho(t)

	conn, err := c.Dial("tcp", echo)
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("forwarded "), 10000)
	go func() { _, _ = conn.Write(msg) }()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("got different bytes back through the forward")
	}
	conn.Close()
	if ts := e.endedSession(t, api.SessionForward, ""); ts.Command != echo {
		t.Fatalf("got index entry %+v; want command %s", ts, echo)
	}

	// The node decides where forwards may go; its refusal reaches the client.
	if _, err := c.Dial("tcp", "192.0.2.1:80"); err == nil {
		t.Fatal("forward to a destination the node refuses: got a connection; want a rejection")
	}
	// No allocation, no forwarding.
	cmd := e.dial(u, CommandUser)
	if _, err := cmd.Dial("tcp", echo); err == nil || !strings.Contains(err.Error(), "needs an allocation") {
		t.Fatalf("forward in command mode: got %v; want it refused", err)
	}
}

// TestRefusedRequests: channel types other than session and direct-tcpip,
// global requests, and subsystems other than sftp are refused.
func TestRefusedRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.newUser()
	c := e.dial(u, e.addAlloc(u))

	for _, typ := range []string{"x11", "forwarded-tcpip", "auth-agent@openssh.com", "direct-streamlocal@openssh.com", "tun@openssh.com"} {
		_, _, err := c.OpenChannel(typ, nil)
		var open *gossh.OpenChannelError
		if !errors.As(err, &open) || open.Reason != gossh.UnknownChannelType {
			t.Errorf("channel %s: got %v; want it rejected as an unknown channel type", typ, err)
		}
	}
	for _, req := range []string{"tcpip-forward", "streamlocal-forward@openssh.com", "no-more-sessions@openssh.com"} {
		ok, _, err := c.SendRequest(req, true, gossh.Marshal(struct {
			Addr string
			Port uint32
		}{"127.0.0.1", 0}))
		if err != nil || ok {
			t.Errorf("global request %s: got ok=%v err=%v; want refused", req, ok, err)
		}
	}
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RequestSubsystem("netconf"); err == nil {
		t.Error("subsystem netconf: got accepted; want refused")
	}
	if _, _, status, err := sshtest.Run(t, c, "echo alive"); err != nil || status != 0 {
		t.Fatalf("after the refusals: got status %d, %v; want the connection still serving", status, err)
	}
}

// TestOnOwnStackRaisesPanic: a panic in what runs on its own stack reaches
// the caller (the session's recoverMiddleware), as it did when the call
// ran on the session's goroutine.
func TestOnOwnStackRaisesPanic(t *testing.T) {
	ran := false
	onOwnStack(func() { ran = true })
	if !ran {
		t.Fatal("f did not run")
	}
	defer func() {
		if p := recover(); p != "boom" {
			t.Fatalf("recovered %v; want boom", p)
		}
	}()
	onOwnStack(func() { panic("boom") })
	t.Fatal("no panic")
}
