package sshtest

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

// Run runs command in a new session of c and returns stdout, stderr and
// the exit status (-1 with the error when there is none).
func Run(t testing.TB, c *gossh.Client, command string) (stdout, stderr string, status int, err error) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	defer s.Close()
	var out, errOut Buffer
	s.Stdout, s.Stderr = &out, &errOut
	err = s.Run(command)
	var exitErr *gossh.ExitError
	switch {
	case err == nil:
		status = 0
	case errors.As(err, &exitErr):
		status, err = exitErr.ExitStatus(), nil
	default:
		status = -1
	}
	return out.String(), errOut.String(), status, err
}

// ExitStatus is the exit status in err from Session.Wait or Run (0 for
// nil), or the test fails.
func ExitStatus(t testing.TB, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var exit *gossh.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("got %v; want an exit status", err)
	}
	return exit.ExitStatus()
}

// Buffer is a bytes.Buffer safe for one writer and concurrent readers:
// a session's output, read while it comes in.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ReadUntilTimeout is how long ReadUntil waits for its text.
const ReadUntilTimeout = 20 * time.Second

// ReadUntil reads r until the text read so far contains want, and
// returns that text, or fails the test after ReadUntilTimeout. It reads a
// byte at a time, so that what follows want is left for the next call (a
// buffered reader would swallow it when output comes in one piece).
func ReadUntil(t testing.TB, r io.Reader, want string) string {
	t.Helper()
	found := make(chan string, 1)
	go func() {
		var sb strings.Builder
		b := make([]byte, 1)
		for !strings.Contains(sb.String(), want) {
			if _, err := io.ReadFull(r, b); err != nil {
				break
			}
			sb.WriteByte(b[0])
		}
		found <- sb.String()
	}()
	select {
	case got := <-found:
		if !strings.Contains(got, want) {
			t.Fatalf("got output %q; want it to contain %q", got, want)
		}
		return got
	case <-time.After(ReadUntilTimeout):
		t.Fatalf("got no %q within %s", want, ReadUntilTimeout)
		return ""
	}
}

// ListenEcho serves a TCP echo on loopback, the target of port forwards,
// until the test ends, and returns its address.
func ListenEcho(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}
