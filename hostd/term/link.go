package term

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshlink"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// Links. sshgate reaches the terminal either with SSH (a second SSH
// connection, gliderlabs' server) or with a link (internal/sshlink: one
// TLS 1.3 connection carrying SSH's connection layer, without a second
// SSH transport's encryption and per-packet copies). Both come to the
// same port and are told apart by their first byte: a TLS handshake
// record (0x16) is a link, anything else SSH.
//
// A link authenticates exactly as SSH does: the server's TLS certificate
// is its SSH host key (the gateway checks the same pin), and the gateway
// proves a gateway certificate and then a ticket, both signatures bound
// to the TLS session. The two steps run the same checks as the SSH path
// (verifyGateway, verify, the replay claim), and the link is then served
// by the same targets.

// sniffWait bounds the wait for a connection's first byte: a client that
// waits for the server to speak first is served as SSH after it.
const sniffWait = 2 * time.Second

// sniffing wraps ln so that links are served here and only SSH
// connections reach the gliderlabs server.
func (s *Server) sniffing(ln net.Listener) net.Listener {
	l := &sniffListener{Listener: ln, s: s, accepted: make(chan accepted), done: make(chan struct{})}
	go l.acceptLoop()
	return l
}

// sniffListener accepts on its Listener and sniffs each connection in a
// goroutine of its own, so a slow client does not hold up the others.
type sniffListener struct {
	net.Listener
	s        *Server
	accepted chan accepted // SSH connections and accept errors, for Accept
	done     chan struct{} // closed by Close
	once     sync.Once
}

type accepted struct {
	nc  net.Conn
	err error
}

func (l *sniffListener) acceptLoop() {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			// The server judges: it backs off and accepts again (EMFILE,
			// ...), or returns and closes l.
			select {
			case l.accepted <- accepted{err: err}:
			case <-l.done:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go l.sniff(nc)
	}
}

// sniff serves nc as a link or hands it to Accept as SSH.
func (l *sniffListener) sniff(nc net.Conn) {
	_ = nc.SetReadDeadline(time.Now().Add(min(sniffWait, l.s.cfg.HandshakeTimeout)))
	conn, isLink, err := sshlink.Sniff(nc)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		conn = nc // silent so far: SSH, where the server may speak first
	case err != nil:
		_ = nc.Close()
		return
	}
	_ = nc.SetReadDeadline(time.Time{})
	if isLink {
		l.s.serveLink(conn)
		return
	}
	select {
	case l.accepted <- accepted{nc: conn}:
	case <-l.done:
		_ = nc.Close()
	}
}

func (l *sniffListener) Accept() (net.Conn, error) {
	select {
	case a := <-l.accepted:
		return a.nc, a.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *sniffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// linkSet holds the open links, for Close.
type linkSet struct {
	// mu protects the following.
	mu     sync.Mutex
	m      map[*sshlink.Conn]struct{}
	closed bool
}

// add tracks lc; false (and lc closed) once the server is closed.
func (ls *linkSet) add(lc *sshlink.Conn) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		_ = lc.Close()
		return false
	}
	ls.m[lc] = struct{}{}
	return true
}

func (ls *linkSet) remove(lc *sshlink.Conn) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.m, lc)
}

func (ls *linkSet) closeAll() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.closed = true
	for lc := range ls.m {
		_ = lc.Close()
	}
}

// serveLink authenticates a link and serves its channels and requests
// until it ends.
func (s *Server) serveLink(nc net.Conn) {
	c := &conn{s: s, nc: nc}
	lc, chans, reqs, err := sshlink.Server(nc, &sshlink.ServerConfig{
		HostKey:       s.cfg.HostKey,
		Timeout:       s.cfg.HandshakeTimeout,
		VerifyGateway: func(key gossh.PublicKey) error { return s.linkGateway(c, key) },
		VerifyTicket:  func(user string, key gossh.PublicKey) error { return s.linkTicket(c, user, key) },
	})
	if err != nil {
		s.handshakeFailed(nc, fmt.Errorf("link: %w", err))
		return
	}
	if !s.links.add(lc) {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		s.links.remove(lc)
	}()
	// One goroutine per link besides its reader, this one, for both its
	// channels and its global requests (BenchmarkIdleSessions). The reader
	// closes both Go channels when the link ends; each is serviced here
	// without blocking on the other (a channel is served by its own
	// goroutine; a request is a forward's bind or cancel).
	for chans != nil || reqs != nil {
		select {
		case nch, ok := <-chans:
			if !ok {
				chans = nil
				continue
			}
			go s.serveChannel(c, c.resolveTarget(ctx, lc), nch)
		case req, ok := <-reqs:
			if !ok {
				reqs = nil
				continue
			}
			ok, payload := false, []byte(nil)
			if req.Type == sshwire.ForwardRequest || req.Type == sshwire.CancelForwardRequest {
				ok, payload = s.forward(c, c.resolveTarget(ctx, lc), req)
			}
			if req.WantReply {
				_ = sshlink.Reply(req, ok, payload)
			}
		}
	}
}

// linkGateway is a link's first step: the key, whose possession the link
// proved, must be a gateway certificate.
func (s *Server) linkGateway(c *conn, key gossh.PublicKey) error {
	id, err := s.verifyGateway(key)
	if err != nil {
		s.cfg.Log.Info("terminal key refused: not a gateway certificate", "remote", c.nc.RemoteAddr().String(),
			"transport", "link", "err", err)
		return err
	}
	c.gatewayAuthenticated(id)
	return nil
}

// linkTicket is a link's second step: the ticket is checked as on SSH and
// its serial spent.
func (s *Server) linkTicket(c *conn, user string, key gossh.PublicKey) error {
	gw := c.gatewayIdentity()
	if gw == nil {
		return fmt.Errorf("%w: no gateway certificate", sshcert.ErrUnverifiedKey)
	}
	t, exts, err := s.spend(user, key)
	if err != nil {
		s.cfg.Log.Info("terminal key refused", "remote", c.nc.RemoteAddr().String(), "user", user,
			"transport", "link", "err", err)
		return err
	}
	s.admit(c, t, exts, gw, c.nc.RemoteAddr(), "link")
	return nil
}
