package env_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/internal/api"
)

// homeAccounts are sandbox accounts run as the test's own user: each name
// has a home under dir (made on lookup), /bin/sh as its shell.
type homeAccounts struct{ dir string }

var errNoAccount = errors.New("no such account")

func (a homeAccounts) Lookup(_ context.Context, name string) (env.Account, error) {
	if name == "" || strings.Contains(name, "/") {
		return env.Account{}, errNoAccount
	}
	home := filepath.Join(a.dir, name)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return env.Account{}, err
	}
	return env.Account{Name: name, Home: home, Shell: "/bin/sh"}, nil
}

// syncBuffer is a bytes.Buffer safe for a process's copies and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newFactory(t *testing.T, cfg env.Config) *env.Factory {
	t.Helper()
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	if cfg.Accounts == nil {
		cfg.Accounts = homeAccounts{dir: t.TempDir()}
	}
	f, err := env.NewFactory(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func openPOSIX(t *testing.T) (env.Environment, env.Account) {
	t.Helper()
	f := newFactory(t, env.Config{})
	e, err := f.Open(context.Background(), env.Alloc{ID: "a-1", PosixUser: "u-a-1", Shape: api.ShapeBaremetal})
	if err != nil {
		t.Fatal(err)
	}
	acct, ok := env.AccountOf(e)
	if !ok {
		t.Fatalf("Open(baremetal) = %T; want a posix environment", e)
	}
	return e, acct
}

// run runs spec to its end and returns its stdout and exit status.
func run(t *testing.T, e env.Environment, spec env.ExecSpec) (string, env.ExitStatus) {
	t.Helper()
	var out syncBuffer
	spec.Stdout = &out
	if spec.Stderr == nil {
		spec.Stderr = &out
	}
	p, err := e.Exec(context.Background(), spec)
	if err != nil {
		t.Fatalf("Exec(%+v): %v", spec, err)
	}
	st := p.Wait()
	return out.String(), st
}

func TestPOSIXExec(t *testing.T) {
	e, acct := openPOSIX(t)
	tests := []struct {
		name     string
		spec     env.ExecSpec
		want     string
		wantCode int
	}{
		{name: "command through the shell", spec: env.ExecSpec{Command: `echo "$HOME $USER"; exit 3`},
			want: acct.Home + " " + acct.Name + "\n", wantCode: 3},
		{name: "argv on the session PATH", spec: env.ExecSpec{Argv: []string{"printf", "%s|", "a b", "c"}}, want: "a b|c|"},
		{name: "working directory is the home", spec: env.ExecSpec{Command: "pwd"}, want: acct.Home + "\n"},
		{name: "extra variables", spec: env.ExecSpec{Command: `echo "$LANG"`, Env: []string{"LANG=C.UTF-8"}}, want: "C.UTF-8\n"},
		{name: "stdin", spec: env.ExecSpec{Command: "tr a-z A-Z", Stdin: strings.NewReader("hello")}, want: "HELLO"},
		{name: "agent socket", spec: env.ExecSpec{Command: `echo "$SSH_AUTH_SOCK"`, AgentSocket: "/tmp/agent.sock"}, want: "/tmp/agent.sock\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, st := run(t, e, tt.spec)
			if got != tt.want || st.Code != tt.wantCode || st.Signal != 0 {
				t.Errorf("got %q, %+v; want %q, code %d", got, st, tt.want, tt.wantCode)
			}
		})
	}
}

func TestPOSIXExecRefusesBadSpecs(t *testing.T) {
	e, _ := openPOSIX(t)
	for _, spec := range []env.ExecSpec{{Subsystem: "x11"}, {Argv: []string{"no-such-program-anywhere"}}} {
		if p, err := e.Exec(context.Background(), spec); err == nil {
			p.Wait()
			t.Errorf("Exec(%+v): got no error; want one", spec)
		}
	}
}

func TestPOSIXSignalAndExitSignal(t *testing.T) {
	e, _ := openPOSIX(t)
	p, err := e.Exec(context.Background(), env.ExecSpec{Command: "exec sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Signal(syscall.SIGTERM) {
		t.Fatal("Signal(SIGTERM) = false on a running process")
	}
	if st := p.Wait(); st.Signal != syscall.SIGTERM {
		t.Errorf("got %+v; want ended by SIGTERM", st)
	}
	if p.Signal(syscall.SIGTERM) {
		t.Error("Signal after the end: got true; want false")
	}
	if err := p.Resize(80, 24, 0, 0); !errors.Is(err, env.ErrNoPTY) {
		t.Errorf("Resize without a PTY: got %v; want ErrNoPTY", err)
	}
}

func TestPOSIXExecPTY(t *testing.T) {
	e, _ := openPOSIX(t)
	in, inW := io.Pipe()
	var out syncBuffer
	p, err := e.Exec(context.Background(), env.ExecSpec{
		Command: `stty size; test -t 0 && echo "term=$TERM"; read x; stty size`,
		PTY:     &env.PTY{Term: "xterm-test", Columns: 100, Rows: 40},
		Stdin:   in, Stdout: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan env.ExitStatus, 1)
	go func() { done <- p.Wait() }()
	waitFor(t, func() bool { return strings.Contains(out.String(), "term=xterm-test") }, &out)
	if err := p.Resize(132, 50, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := inW.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	st := <-done
	_ = inW.Close()
	got := strings.ReplaceAll(out.String(), "\r", "")
	if !strings.HasPrefix(got, "40 100\n") || !strings.HasSuffix(got, "50 132\n") || st.Code != 0 {
		t.Errorf("got %q, %+v; want 40 100 first, 50 132 after the resize, code 0", got, st)
	}
}

func TestPOSIXSFTPInProcess(t *testing.T) {
	e, _ := openPOSIX(t)
	// The sftp client's first packet; the server's answer is a version.
	in := bytes.NewReader([]byte{0, 0, 0, 5, 1, 0, 0, 0, 3})
	got, st := run(t, e, env.ExecSpec{Subsystem: "sftp", Stdin: in})
	if len(got) < 5 || got[4] != 2 /* SSH_FXP_VERSION */ || st.Signal != 0 {
		t.Errorf("got %q, %+v; want an SSH_FXP_VERSION packet", got, st)
	}
}

func TestPOSIXDialLoopback(t *testing.T) {
	e, _ := openPOSIX(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = c.Write([]byte("hi"))
			_ = c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	c, err := e.DialLoopback(context.Background(), "localhost", port)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	_ = c.Close()
	if string(b) != "hi" {
		t.Errorf("got %q; want hi", b)
	}
	for _, tt := range []struct {
		host string
		port int
		want error
	}{
		{"10.0.0.1", port, env.ErrNotLoopback},
		{"example.com", port, env.ErrNotLoopback},
		{"127.0.0.1", 0, env.ErrInvalidSpec},
		{"127.0.0.1", 70000, env.ErrInvalidSpec},
	} {
		if _, err := e.DialLoopback(context.Background(), tt.host, tt.port); !errors.Is(err, tt.want) {
			t.Errorf("DialLoopback(%s, %d): got %v; want %v", tt.host, tt.port, err, tt.want)
		}
	}
}

func TestPOSIXAttachDetach(t *testing.T) {
	e, acct := openPOSIX(t)
	ctx := context.Background()
	data := t.TempDir()
	mustWrite(t, filepath.Join(data, "weights.bin"), "w")
	if err := e.Attach(ctx, env.Mount{Name: "data", Source: data}); err != nil {
		t.Fatal(err)
	}
	if got, _ := run(t, e, env.ExecSpec{Command: "cat ~/data/weights.bin"}); got != "w" {
		t.Errorf("the attached directory in the environment: got %q; want w", got)
	}
	// A second attachment of the name, or onto a file of the user's, is
	// refused and changes nothing.
	mustWrite(t, filepath.Join(acct.Home, "notes"), "mine")
	for _, m := range []env.Mount{{Name: "data", Source: data}, {Name: "notes", Source: data}} {
		if err := e.Attach(ctx, m); err == nil {
			t.Errorf("Attach(%+v) over an existing name: got no error", m)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(acct.Home, "notes")); string(b) != "mine" {
		t.Errorf("the user's file after a refused attach: %q", b)
	}
	bad := []struct {
		m    env.Mount
		want error
	}{
		{env.Mount{Name: "../escape", Source: data}, env.ErrInvalidSpec},
		{env.Mount{Name: "..", Source: data}, env.ErrInvalidSpec},
		{env.Mount{Name: "", Source: data}, env.ErrInvalidSpec},
		{env.Mount{Name: "rel", Source: "relative/dir"}, env.ErrInvalidSpec},
		{env.Mount{Name: "file", Source: filepath.Join(data, "weights.bin")}, env.ErrUnsupported},
		{env.Mount{Name: "ro", Source: data, ReadOnly: true}, env.ErrUnsupported},
	}
	for _, tt := range bad {
		if err := e.Attach(ctx, tt.m); !errors.Is(err, tt.want) {
			t.Errorf("Attach(%+v): got %v; want %v", tt.m, err, tt.want)
		}
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(acct.Home), "escape")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused attach left something outside the home: %v", err)
	}
	if err := e.Detach(ctx, "notes"); !errors.Is(err, env.ErrInvalidSpec) {
		t.Errorf("Detach of the user's own file: got %v; want ErrInvalidSpec", err)
	}
	if err := e.Detach(ctx, "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(acct.Home, "data")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Detach: %v; want gone", err)
	}
	if _, err := os.Stat(filepath.Join(data, "weights.bin")); err != nil {
		t.Errorf("Detach touched the source: %v", err)
	}
}

func TestPOSIXStatus(t *testing.T) {
	e, acct := openPOSIX(t)
	st, err := e.Status(context.Background())
	if err != nil || !st.Ready || st.Kind != env.KindPOSIX {
		t.Errorf("got %+v, %v; want a ready posix environment", st, err)
	}
	if err := os.RemoveAll(acct.Home); err != nil {
		t.Fatal(err)
	}
	if st, err := e.Status(context.Background()); err != nil || st.Ready {
		t.Errorf("without a home: got %+v, %v; want not ready", st, err)
	}
}

func mustWrite(t *testing.T, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
