package testutil

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// SilentProxy forwards loopback TCP connections to a target and can cut
// them silently, as a network partition does: while cut it neither
// forwards a byte nor closes anything, and connections made meanwhile are
// accepted and held. Nothing the clients see tells them the link is gone
// but silence; when the cut ends the held bytes flow again (TCP would
// have retransmitted them). TCPProxy, by contrast, closes connections.
type SilentProxy struct {
	ln              net.Listener
	network, target string

	// mu protects cut and healed (closed and replaced when a cut ends).
	mu     sync.Mutex
	cut    bool
	healed chan struct{}
}

// StartSilentProxy listens on a free loopback port and forwards to target
// on network ("tcp" host:port, or "unix" and a socket path) until the test
// ends.
func StartSilentProxy(t testing.TB, network, target string) *SilentProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &SilentProxy{ln: ln, network: network, target: target, healed: make(chan struct{})}
	t.Cleanup(func() {
		ln.Close()
		p.SetCut(false)
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
func (p *SilentProxy) Addr() string { return p.ln.Addr().String() }

// SetCut starts or ends a silent partition.
func (p *SilentProxy) SetCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut && !cut {
		close(p.healed)
		p.healed = make(chan struct{})
	}
	p.cut = cut
}

// wait returns once the link is not cut.
func (p *SilentProxy) wait() {
	p.mu.Lock()
	cut, healed := p.cut, p.healed
	p.mu.Unlock()
	if cut {
		<-healed
	}
}

func (p *SilentProxy) serve(c net.Conn) {
	defer c.Close()
	p.wait()
	up, err := net.Dial(p.network, p.target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { p.copy(up, c); done <- struct{}{} }()
	go func() { p.copy(c, up); done <- struct{}{} }()
	<-done
}

// copy forwards src to dst, holding each chunk while the link is cut.
func (p *SilentProxy) copy(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// PostgresVia returns dsn (a database of Postgres(t, ...), reached over
// its Unix socket) reached through a SilentProxy instead, and the proxy.
func PostgresVia(t testing.TB, dsn string) (string, *SilentProxy) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(cfg.Host, fmt.Sprintf(".s.PGSQL.%d", cfg.Port))
	p := StartSilentProxy(t, "unix", sock)
	host, port, _ := net.SplitHostPort(p.Addr())
	u := url.URL{Scheme: "postgres", User: url.User(cfg.User), Host: net.JoinHostPort(host, port), Path: "/" + cfg.Database,
		RawQuery: "sslmode=disable"}
	if cfg.Password != "" {
		u.User = url.UserPassword(cfg.User, cfg.Password)
	}
	return u.String(), p
}
