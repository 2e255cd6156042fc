package term_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// TestSessions runs what a user does through the gateway, for a bare-metal
// allocation (a sim user on the node) and a slice (the hop into a sim VM),
// over SSH and over a link.
func TestSessions(t *testing.T) {
	eachHarness(t, func(t *testing.T, h *harness) {
		c := h.client()
		t.Run("exec exit status", func(t *testing.T) { testExec(t, c) })
		t.Run("stdin and EOF", func(t *testing.T) { testStdin(t, c) })
		t.Run("env allow-list", func(t *testing.T) { testEnv(t, c) })
		t.Run("pty window-change", func(t *testing.T) { testPTY(t, c) })
		t.Run("login shell", func(t *testing.T) { testShell(t, h, c) })
		t.Run("signal", func(t *testing.T) { testSignal(t, h, c) })
		t.Run("sftp roundtrip", func(t *testing.T) { testSFTP(t, h, c) })
		t.Run("scp through exec", func(t *testing.T) { testSCP(t, h, c) })
		t.Run("direct-tcpip", func(t *testing.T) { testForward(t, c) })
	})
}

func testExec(t *testing.T, c *gossh.Client) {
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var stdout, stderr bytes.Buffer
	s.Stdout, s.Stderr = &stdout, &stderr
	err = s.Run("echo hi; echo oops >&2; exit 3")
	if got := sshtest.ExitStatus(t, err); got != 3 {
		t.Errorf("got exit status %d; want 3", got)
	}
	if got, want := stdout.String(), "hi\n"; got != want {
		t.Errorf("got stdout %q; want %q", got, want)
	}
	if got, want := stderr.String(), "oops\n"; got != want {
		t.Errorf("got stderr %q; want %q", got, want)
	}
}

func testStdin(t *testing.T, c *gossh.Client) {
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in := make([]byte, 1<<20)
	_, _ = rand.Read(in)
	s.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	s.Stdout = &out
	if err := s.Run("cat"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), in) {
		t.Errorf("got %d bytes back from cat; want the %d sent", out.Len(), len(in))
	}
}

func testEnv(t *testing.T, c *gossh.Client) {
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tests := []struct {
		name, value string
		wantOK      bool
	}{
		{"LANG", "C.UTF-8", true},
		{"LC_ALL", "C", true},
		{"TERM", "vt100", true},
		{"FOO", "bar", false},
		{"LD_PRELOAD", "/tmp/x.so", false},
		{"PATH", "/tmp", false},
		{"LC_", "x", false},
		{"LC_all", "x", false},
	}
	for _, tt := range tests {
		err := s.Setenv(tt.name, tt.value)
		if got := err == nil; got != tt.wantOK {
			t.Errorf("setenv %s: got accepted %v; want %v", tt.name, got, tt.wantOK)
		}
	}
	out, err := s.Output(`echo "$LANG|$LC_ALL|$TERM|$FOO|$LD_PRELOAD|$PATH"`)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(string(out))
	if !strings.HasPrefix(got, "C.UTF-8|C|vt100|||") || strings.HasSuffix(got, "|/tmp") {
		t.Errorf("got environment %q; want LANG, LC_ALL and TERM set, FOO and LD_PRELOAD unset, PATH not /tmp", got)
	}
}

func testPTY(t *testing.T, c *gossh.Client) {
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
	stdout, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	if err := s.Start(`echo "term=$TERM tty=$(test -t 0 && echo yes)"; stty size; while read x; do s=$(stty size); echo "$s"; [ "$s" = "50 132" ] && break; done; exit 4`); err != nil {
		t.Fatal(err)
	}
	sshtest.ReadUntil(t, r, "term=xterm-256color tty=yes")
	sshtest.ReadUntil(t, r, "24 80")
	if err := s.WindowChange(50, 132); err != nil {
		t.Fatal(err)
	}
	// The window change travels as a request and the newline as channel
	// data; the server may see them in either order, so ask again until
	// the new size shows (the size must change, not merely eventually be
	// printed: the first answer was 24 80).
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if _, err := io.WriteString(stdin, "\n"); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	sshtest.ReadUntil(t, r, "50 132")
	close(stop)
	_, _ = io.Copy(io.Discard, r)
	if got := sshtest.ExitStatus(t, s.Wait()); got != 4 {
		t.Errorf("got exit status %d; want 4", got)
	}
}

func testShell(t *testing.T, h *harness, c *gossh.Client) {
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RequestPty("xterm", 24, 80, gossh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	stdin, err := s.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "echo \"at:$(pwd):$USER\"; exit 5\n"); err != nil {
		t.Fatal(err)
	}
	sshtest.ReadUntil(t, bufio.NewReader(stdout), "at:"+h.home()+":"+h.user)
	if got := sshtest.ExitStatus(t, s.Wait()); got != 5 {
		t.Errorf("got exit status %d; want 5", got)
	}
}

func testSignal(t *testing.T, h *harness, c *gossh.Client) {
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stdout, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("echo ready; exec sleep 30"); err != nil {
		t.Fatal(err)
	}
	sshtest.ReadUntil(t, bufio.NewReader(stdout), "ready")
	if err := s.Signal(gossh.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = s.Wait()
	var exit *gossh.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("got %v; want the command ended by the signal", err)
	}
	// hostd reports the signal (exit-signal); the sim guest, like a
	// shell, an exit status.
	if h.shape == api.ShapeBaremetal && exit.Signal() != "TERM" {
		t.Errorf("got exit %v; want signal TERM", exit)
	}
	if exit.ExitStatus() == 0 {
		t.Errorf("got exit status 0 after SIGTERM; want non-zero")
	}
}

func testSFTP(t *testing.T, h *harness, c *gossh.Client) {
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	data := make([]byte, 3<<20+17)
	_, _ = rand.Read(data)
	f, err := sc.Create("up.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(filepath.Join(h.home(), "up.bin"))
	if err != nil || !bytes.Equal(onDisk, data) {
		t.Fatalf("got %d bytes in the home directory (%v); want the %d put", len(onDisk), err, len(data))
	}
	wd, err := sc.Getwd()
	if err != nil || wd != h.home() {
		t.Errorf("got working directory %q (%v); want %q", wd, err, h.home())
	}
	g, err := sc.Open("up.bin")
	if err != nil {
		t.Fatal(err)
	}
	var back bytes.Buffer
	if _, err := g.WriteTo(&back); err != nil {
		t.Fatal(err)
	}
	_ = g.Close()
	if !bytes.Equal(back.Bytes(), data) {
		t.Errorf("got %d bytes back; want the %d put", back.Len(), len(data))
	}
}

// testSCP speaks the classic scp protocol to `scp -t`, as scp -O does: scp
// is an ordinary command to the terminal.
func testSCP(t *testing.T, h *harness, c *gossh.Client) {
	if _, err := exec.LookPath("scp"); err != nil {
		t.Skip("no scp")
	}
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stdin, _ := s.StdinPipe()
	stdout, _ := s.StdoutPipe()
	if err := s.Start("scp -t ."); err != nil {
		t.Fatal(err)
	}
	ack := func() {
		t.Helper()
		b := make([]byte, 1)
		if _, err := io.ReadFull(stdout, b); err != nil || b[0] != 0 {
			t.Fatalf("got scp ack %v (%v); want 0", b, err)
		}
	}
	ack()
	_, _ = io.WriteString(stdin, "C0640 6 scp.txt\n")
	ack()
	_, _ = io.WriteString(stdin, "hello\n\x00")
	ack()
	_ = stdin.Close()
	if err := s.Wait(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(h.home(), "scp.txt"))
	if err != nil || string(got) != "hello\n" {
		t.Errorf("got %q (%v); want the file copied", got, err)
	}
}

func testForward(t *testing.T, c *gossh.Client) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			// Answer once the request is complete (EOF): half-close must
			// pass through.
			go func() {
				defer conn.Close()
				b, _ := io.ReadAll(conn)
				_, _ = conn.Write(bytes.ToUpper(b))
			}()
		}
	}()
	for _, addr := range []string{ln.Addr().String(), "localhost:" + portOf(ln)} {
		conn, err := c.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("forward to %s: %v", addr, err)
		}
		_, _ = io.WriteString(conn, "ping")
		if err := conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(conn)
		_ = conn.Close()
		if string(got) != "PING" {
			t.Errorf("forward to %s: got %q; want PING", addr, got)
		}
	}
	// Only the target's loopback: not another host, not a name.
	for _, addr := range []string{"192.0.2.1:80", "example.com:80", "127.0.0.1:0"} {
		if conn, err := c.Dial("tcp", addr); err == nil {
			conn.Close()
			t.Errorf("forward to %s: got a connection; want refused", addr)
		}
	}
}

func portOf(ln net.Listener) string {
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return p
}
