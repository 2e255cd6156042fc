package testutil

import (
	"io"
	"net"
	"sync"
	"testing"
)

// TCPProxy forwards loopback TCP connections to a target and can cut them
// all, refusing new ones until restored: a network outage for the clients
// that dial through it, while everyone else stays connected.
type TCPProxy struct {
	ln     net.Listener
	target string

	// mu protects the following.
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

// StartTCPProxy listens on a free loopback port and forwards to target
// (host:port) until the test ends.
func StartTCPProxy(t testing.TB, target string) *TCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &TCPProxy{ln: ln, target: target}
	t.Cleanup(func() {
		ln.Close()
		p.SetCut(true)
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

// Addr is the proxy's host:port.
func (p *TCPProxy) Addr() string { return p.ln.Addr().String() }

func (p *TCPProxy) serve(c net.Conn) {
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.mu.Unlock()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns = append(p.conns, c, up)
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
}

// SetCut cuts (closing every open connection) or restores the link.
func (p *TCPProxy) SetCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}
