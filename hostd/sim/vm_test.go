package sim

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// guest boots a sim guest for user and returns a client logged in to it
// and the user's home in the sandbox.
func guest(t *testing.T) (*gossh.Client, string) {
	t.Helper()
	ctx := context.Background()
	h, err := NewHypervisor(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	key, line := guestKey(t)
	if err := h.Define(ctx, testSpec("a-vmt", seedDir(t, "gbob", line))); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx, "a-vmt"); err != nil {
		t.Fatal(err)
	}
	addr, err := h.Address(ctx, "a-vmt")
	if err != nil {
		t.Fatal(err)
	}
	c, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{User: "gbob", Auth: []gossh.AuthMethod{gossh.PublicKeys(key)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, filepath.Join(h.Sandbox("a-vmt"), "gbob")
}

func TestGuestPTY(t *testing.T) {
	c, _ := guest(t)
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RequestPty("vt100", 30, 90, nil); err != nil {
		t.Fatal(err)
	}
	stdin, _ := s.StdinPipe()
	stdout, _ := s.StdoutPipe()
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(stdin, `echo "T=$TERM"; stty size`+"\n")
	sshtest.ReadUntil(t, stdout, "T=vt100")
	sshtest.ReadUntil(t, stdout, "30 90")
	if err := s.WindowChange(40, 100); err != nil {
		t.Fatal(err)
	}
	// The window change is a request of its own, which the guest may
	// apply after the next line of input: wait for it there.
	_, _ = io.WriteString(stdin, `until [ "$(stty size)" = "40 100" ]; do sleep 0.05; done; stty size; exit 6`+"\n")
	sshtest.ReadUntil(t, stdout, "40 100")
	_, _ = io.Copy(io.Discard, stdout)
	var exit *gossh.ExitError
	if err := s.Wait(); !errors.As(err, &exit) || exit.ExitStatus() != 6 {
		t.Errorf("got %v; want exit status 6", err)
	}
}

func TestGuestSFTP(t *testing.T) {
	c, home := guest(t)
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	data := make([]byte, 256<<10)
	_, _ = rand.Read(data)
	f, err := sc.Create("blob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	got, err := os.ReadFile(filepath.Join(home, "blob"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes in the guest home (%v); want %d", len(got), err, len(data))
	}
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RequestSubsystem("gpuaas"); err == nil {
		t.Error("unknown subsystem: accepted; want refused")
	}
}

func TestGuestDirectTCPIP(t *testing.T) {
	c, _ := guest(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		b, _ := io.ReadAll(conn) // answers after EOF: half-close passes
		_, _ = conn.Write(bytes.ToUpper(b))
	}()
	conn, err := c.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(conn, "pong")
	_ = conn.(interface{ CloseWrite() error }).CloseWrite()
	got, _ := io.ReadAll(conn)
	conn.Close()
	if string(got) != "PONG" {
		t.Errorf("got %q; want PONG", got)
	}
	if conn, err := c.Dial("tcp", "192.0.2.1:80"); err == nil {
		conn.Close()
		t.Error("forward off the guest's loopback: got a connection; want refused")
	}
}
