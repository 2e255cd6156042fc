package sshgate

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/gateway/core"
)

// TestCoreOpenPort: the core opens a TCP stream to a port on an
// allocation's loopback over the link to its node, for the allocation's
// own user only, and data on it is the allocation's activity: what the
// HTTPS front (gateway/httpfront) will be built on.
func TestCoreOpenPort(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u, other := e.newUser(), e.newUser()
	alloc := e.addAlloc(u)
	port := echoServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	grant := func(u *user) core.Grant {
		return core.Grant{AllocationID: alloc, UserID: u.id,
			Certificate: strings.TrimSpace(string(gossh.MarshalAuthorizedKey(u.cert)))}
	}

	before := e.report(alloc)
	stream, err := e.gw.core.OpenPort(ctx, grant(u), port)
	if err != nil {
		t.Fatalf("open port %d: %v", port, err)
	}
	if _, err := io.WriteString(stream, "ping"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(stream, got); err != nil || string(got) != "ping" {
		t.Fatalf("echo: got %q, %v; want ping", got, err)
	}
	if after := e.report(alloc); !after.After(before) {
		t.Errorf("last active: got %s after the stream's data, %s before; want it moved", after, before)
	}
	if err := stream.Close(); err != nil {
		t.Errorf("close: %v", err)
	}

	t.Run("another user's allocation", func(t *testing.T) {
		if s, err := e.gw.core.OpenPort(ctx, grant(other), port); err == nil {
			s.Close()
			t.Fatal("another user opened the port; want a refusal")
		}
	})
	t.Run("port 0", func(t *testing.T) {
		if s, err := e.gw.core.OpenPort(ctx, grant(u), 0); err == nil {
			s.Close()
			t.Fatal("port 0 opened; want an error")
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := uint16(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		if s, err := e.gw.core.OpenPort(ctx, grant(u), closed); err == nil {
			s.Close()
			t.Fatal("a closed port opened; want the node's refusal")
		}
	})
}

// echoServer serves an echo on a loopback port until the test ends.
func echoServer(t *testing.T) uint16 {
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
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}
