package term

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/gliderlabs/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// connKey is the context key of a connection's *conn.
type connKey struct{}

// conn is one client connection: the ticket it authenticated with and,
// once the first channel opens, the target it is served by.
type conn struct {
	s  *Server
	nc net.Conn

	// mu protects the following.
	mu      sync.Mutex
	gateway *sshcert.GatewayIdentity // set by the first authentication step
	ticket  *sshcert.Ticket
	exts    map[string]string
	target  target
	err     error
}

// target serves a connection's channels: the node itself for bare metal,
// the allocation's VM for a slice.
type target interface {
	// session serves a session channel.
	session(nc gossh.NewChannel)
	// directTCPIP serves a direct-tcpip channel to d.
	directTCPIP(nc gossh.NewChannel, d sshwire.DirectTCPIPMsg)
	// forward serves a tcpip-forward global request (ssh -R): the reply
	// is for the client.
	forward(payload []byte) (ok bool, reply []byte)
	// cancelForward serves a cancel-tcpip-forward global request.
	cancelForward(payload []byte) bool
	// close ends what the target holds for the connection.
	close()
}

// gatewayAuthenticated records the first step: the client proved a
// gateway certificate.
func (c *conn) gatewayAuthenticated(id sshcert.GatewayIdentity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gateway = &id
}

// gatewayIdentity is the gateway the client proved to be, nil before.
func (c *conn) gatewayIdentity() *sshcert.GatewayIdentity {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gateway
}

func (c *conn) authenticated(t sshcert.Ticket, exts map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ticket, c.exts = &t, exts
	_ = c.nc.SetDeadline(time.Time{})
}

// permits reports whether the ticket carries the extension.
func (c *conn) permits(ext string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.exts[ext]
	return ok
}

// connOf returns the connection's state after checking, once more, that
// a gateway authenticated it and its identity is a ticket confirmed for
// the key that authenticated, and resolves its target on first use. A
// connection without one is closed.
func (s *Server) connOf(ctx ssh.Context, sc *gossh.ServerConn) (*conn, error) {
	c, _ := ctx.Value(connKey{}).(*conn)
	v, err := sshcert.VerifiedFrom(sc.Permissions)
	if err == nil && (c == nil || v.Ticket == nil) {
		err = sshcert.ErrUnverifiedKey
	}
	if err != nil {
		_ = sc.Close()
		return nil, err
	}
	if !c.holds(v.Ticket.Serial) {
		_ = sc.Close()
		return nil, fmt.Errorf("%w: connection state does not match its identity", sshcert.ErrUnverifiedKey)
	}
	return c, c.resolveTarget(ctx, sc)
}

// holds reports whether a gateway and then the ticket with serial
// authenticated the connection.
func (c *conn) holds(serial uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gateway != nil && c.ticket != nil && c.ticket.Serial == serial
}

// resolveTarget resolves the connection's target on first use; ctx ends
// with the connection, and sc is the connection on which the server opens
// channels towards the client (forwarded-tcpip, the agent's). The first
// outcome is kept.
func (c *conn) resolveTarget(ctx context.Context, sc gossh.Conn) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.target == nil && c.err == nil {
		c.target, c.err = c.s.resolve(ctx, *c.ticket, c, sc)
		if c.target != nil {
			// No goroutine waits for the end (BenchmarkIdleSessions).
			context.AfterFunc(ctx, c.target.close)
		}
	}
	return c.err
}

// resolve decides how the allocation is served: its environment
// (env.Factory.Open, the one place that reads the node's shape) is
// relayed channel by channel when it is an SSH server itself (a VM's
// sshd: env.Hopper), and otherwise served here with its processes run by
// the environment (bare metal).
func (s *Server) resolve(ctx context.Context, t sshcert.Ticket, c *conn, sc gossh.Conn) (target, error) {
	if isVolumeTicket(t) { // a volume, no allocation (volume.go)
		return s.resolveVolume(ctx, t)
	}
	_, shape, _ := s.state()
	e, err := s.envs.Open(ctx, env.Alloc{ID: t.Allocation, PosixUser: t.PosixUser, Shape: shape})
	if err != nil {
		return nil, err
	}
	if hop, ok := e.(env.Hopper); ok && t.Workload == "" {
		return &hopTarget{s: s, c: c, hop: hop, env: e, ticket: t, ctx: ctx, sc: sc}, nil
	}
	acct, ok := env.AccountOf(e)
	if _, hop := e.(env.Hopper); hop && !ok && t.Workload != "" { // a slice's workload: workload_guest.go
		return s.guestWorkloadTarget(ctx, c, sc, e, t.PosixUser, t.Workload)
	}
	if !ok {
		_ = e.Close()
		return nil, fmt.Errorf("%w: %s: an environment hostd can neither hop into nor run processes for", ErrNotProvisioned, t.Allocation)
	}
	x := &execTarget{s: s, c: c, env: e, acct: acct, ctx: ctx, sc: sc}
	if t.Workload != "" { // ssh <workload-id>@gateway: workload.go
		return workloadTarget(x, t.Workload)
	}
	return x, nil
}

func (s *Server) handleSession(_ *ssh.Server, sc *gossh.ServerConn, nc gossh.NewChannel, ctx ssh.Context) {
	c, err := s.connOf(ctx, sc)
	s.serveChannel(c, err, nc)
}

func (s *Server) handleDirectTCPIP(_ *ssh.Server, sc *gossh.ServerConn, nc gossh.NewChannel, ctx ssh.Context) {
	c, err := s.connOf(ctx, sc)
	s.serveChannel(c, err, nc)
}

// serveChannel serves a session or direct-tcpip channel of c, an SSH
// connection or a link; err is why c has no target. Other channel types
// are rejected as unknown.
func (s *Server) serveChannel(c *conn, err error, nc gossh.NewChannel) {
	kind := nc.ChannelType()
	switch {
	case kind != "session" && kind != "direct-tcpip":
		_ = nc.Reject(gossh.UnknownChannelType, "unknown channel type "+kind)
		return
	case err != nil:
		s.refuseChannel(nc, gossh.Prohibited, kind, err)
		return
	case kind == "session":
		c.target.session(nc)
		return
	}
	var d sshwire.DirectTCPIPMsg
	if err := gossh.Unmarshal(nc.ExtraData(), &d); err != nil {
		s.refuseChannel(nc, gossh.ConnectionFailed, kind, err)
		return
	}
	if !c.permits(sshcert.ExtensionPermitPortForwarding) {
		s.refuseChannel(nc, gossh.Prohibited, kind, fmt.Errorf("%w: ticket lacks %s", ErrForwardDenied, sshcert.ExtensionPermitPortForwarding))
		return
	}
	c.target.directTCPIP(nc, d)
}

// refuseChannel rejects a channel and logs why; the client sees only the
// rejection reason.
func (s *Server) refuseChannel(nc gossh.NewChannel, reason gossh.RejectionReason, kind string, err error) {
	s.cfg.Log.Info("terminal channel refused", "type", kind, "err", err)
	msg := "refused"
	switch {
	case errors.Is(err, ErrNotProvisioned), errors.Is(err, ErrNoAccount):
		msg = "allocation not available on this node"
	case errors.Is(err, ErrForwardDenied):
		msg = "port forwarding refused"
	case reason == gossh.ConnectionFailed:
		msg = "connection failed"
	}
	_ = nc.Reject(reason, msg)
}
