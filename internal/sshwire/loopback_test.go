package sshwire

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"testing"
)

func TestLoopbackAddrs(t *testing.T) {
	tests := []struct {
		name string
		host string
		port uint32
		want []string // nil: refused
	}{
		{name: "localhost, v4 then v6", host: "LocalHost", port: 22, want: []string{"127.0.0.1:22", "[::1]:22"}},
		{name: "127/8", host: "127.1.2.3", port: 8080, want: []string{"127.1.2.3:8080"}},
		{name: "::1", host: "::1", port: 80, want: []string{"[::1]:80"}},
		{name: "bracketed ::1", host: "[::1]", port: 80, want: []string{"[::1]:80"}},
		{name: "another host", host: "192.0.2.1", port: 80},
		{name: "a name", host: "example.com", port: 80},
		{name: "a name for loopback", host: "localhost.localdomain", port: 80},
		{name: "port 0", host: "127.0.0.1", port: 0},
		{name: "port over 65535", host: "127.0.0.1", port: 65536},
	}
	for _, tt := range tests {
		got, err := LoopbackAddrs(tt.host, tt.port)
		if tt.want == nil {
			if !errors.Is(err, ErrNotLoopback) {
				t.Errorf("%s: got %v, %v; want ErrNotLoopback", tt.name, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}

// TestDialLoopbackSplice forwards through DialLoopback and Splice to a
// server that answers once it has the whole request (its EOF): the
// half-close passes through, and the answer comes back after it.
func TestDialLoopbackSplice(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		c, err := srv.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		_, _ = c.Write(bytes.ToUpper(b))
	}()
	_, port, _ := net.SplitHostPort(srv.Addr().String())
	p, _ := strconv.Atoi(port)

	// front is what the client talks to; Splice joins its far end to the
	// connection DialLoopback made.
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer front.Close()
	spliced := make(chan int64, 1)
	go func() {
		in, err := front.Accept()
		if err != nil {
			spliced <- -1
			return
		}
		var d net.Dialer
		out, err := DialLoopback(context.Background(), DirectTCPIPMsg{DestAddr: "localhost", DestPort: uint32(p)}, func(ctx context.Context, a string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", a)
		})
		if err != nil {
			_ = in.Close()
			spliced <- -1
			return
		}
		spliced <- Splice(in.(*net.TCPConn), out.(*net.TCPConn))
	}()
	c, err := net.Dial("tcp", front.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "ping"); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "PING" {
		t.Errorf("got %q, %v; want PING", got, err)
	}
	if n := <-spliced; n != 8 {
		t.Errorf("Splice copied %d bytes; want 8 (4 each way)", n)
	}

	if _, err := DialLoopback(context.Background(), DirectTCPIPMsg{DestAddr: "192.0.2.1", DestPort: 80}, nil); !errors.Is(err, ErrNotLoopback) {
		t.Errorf("DialLoopback to another host: got %v; want ErrNotLoopback", err)
	}
}
