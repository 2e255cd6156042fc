package sshgate

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshlink"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// connStateKey is the context key of a connection's connState.
type connStateKey struct{}

// connState is what the gateway keeps per client connection: the one SSH
// connection to the node that all the client's channels (sessions and
// port forwards) are multiplexed on. It is opened on the first channel
// that needs it and closed with the client's connection.
type connState struct {
	conn *trackedConn // the client's

	// mu protects the following. It is held while dialling, so the
	// channels of one connection wait for one authorization.
	mu     sync.Mutex
	up     *upstream
	err    error // why the connection to the node could not be made
	closed bool
}

// upstream is an authorized connection to a node's terminal server: a
// link or SSH (Config.NodeTransport), used as an SSH connection either
// way.
type upstream struct {
	auth *api.GateAuthorizeResponse
	conn gossh.Conn
	// chans and reqs are what the node opens and asks: serveNodeChannels
	// serves them.
	chans <-chan gossh.NewChannel
	reqs  <-chan *gossh.Request
	dead  chan struct{} // closed when the connection to the node ends

	// fwds are the remote forwards the node granted the client; agent is
	// set once a session asked the node for the client's agent (remote.go).
	fwds  sshwire.ForwardSet
	agent atomic.Bool
}

func (st *connState) close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	if st.up != nil {
		_ = st.up.conn.Close()
	}
}

// upstreamFor returns the connection's link to the allocation's node,
// authorizing and dialling it on first use. A failure is kept: every later
// channel of the connection gets the same answer (reconnect to retry). A
// link that died (the node's terminal server restarted) is re-dialled.
func (g *Gateway) upstreamFor(ctx ssh.Context, id sshcert.Identity) (*upstream, error) {
	st, ok := ctx.Value(connStateKey{}).(*connState)
	if !ok {
		return nil, errors.New("no connection state")
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, errors.New("connection closed")
	}
	if st.err != nil {
		return nil, st.err
	}
	if st.up != nil {
		select {
		case <-st.up.dead:
			g.log.Info("connection to node lost; dialling again", "allocation", ctx.User(), "node", st.up.auth.NodeID)
			st.up = nil
		default:
			return st.up, nil
		}
	}
	var up *upstream
	var err error
	onOwnStack(func() { up, err = g.dialNode(ctx, id, ctx.User()) })
	if err != nil {
		st.err = err
		return nil, err
	}
	g.serveNodeChannels(ctx, id, up)
	st.up = up
	return up, nil
}

// dialNode asks controld whether id may open alloc and, with the ticket it
// returns for a key made for this connection alone, dials the node's
// terminal server as the allocation's POSIX user: the gateway certificate
// first, then the ticket.
func (g *Gateway) dialNode(ctx context.Context, id sshcert.Identity, alloc string) (*upstream, error) {
	gatewaySigner, err := g.creds.current(g.cfg.Now())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", alloc, err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ticket key: %w", err)
	}
	key, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("ticket key: %w", err)
	}
	auth, err := g.cfg.Client.GateAuthorize(ctx, api.GateAuthorizeRequest{
		AllocationID: alloc,
		UserID:       id.UserID,
		TicketKey:    strings.TrimSpace(string(gossh.MarshalAuthorizedKey(key.PublicKey()))),
		Certificate:  presentedCert(ctx),
	})
	if err != nil {
		return nil, fmt.Errorf("authorize %s: %w", alloc, err)
	}
	if auth.AllocationID != alloc {
		return nil, fmt.Errorf("authorize %s: controld answered for %q", alloc, auth.AllocationID)
	}
	ticket, err := parseTicket(auth.Ticket, key.PublicKey())
	if err != nil {
		return nil, fmt.Errorf("authorize %s: %w", alloc, err)
	}
	ticketSigner, err := gossh.NewCertSigner(ticket, key)
	if err != nil {
		return nil, fmt.Errorf("authorize %s: ticket: %w", alloc, err)
	}

	dialCtx, cancel := context.WithTimeout(ctx, g.cfg.DialTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(dialCtx, "tcp", auth.TerminalAddr)
	if err != nil {
		return nil, fmt.Errorf("dial node %s at %s: %w", auth.NodeID, auth.TerminalAddr, err)
	}
	// The handshake gets the same deadline as the dial.
	deadline, _ := dialCtx.Deadline()
	_ = conn.SetDeadline(deadline)
	cc, chans, reqs, err := g.handshakeNode(conn, auth, gatewaySigner, ticketSigner, time.Until(deadline))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s to node %s at %s: %w", g.cfg.NodeTransport, auth.NodeID, auth.TerminalAddr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	// dead is closed by serveNodeChannels' goroutine, which outlives the
	// connection no longer than it must.
	up := &upstream{auth: auth, conn: cc, chans: chans, reqs: reqs, dead: make(chan struct{})}
	g.log.Info("connected to node", "allocation", alloc, "user", id.UserID, "node", auth.NodeID,
		"addr", auth.TerminalAddr, "posix_user", auth.PosixUser, "transport", g.cfg.NodeTransport)
	return up, nil
}

// handshakeNode authenticates to the node's terminal server on conn over
// the configured transport, within timeout: the gateway certificate, then
// the ticket, the terminal's host key pinned either way.
func (g *Gateway) handshakeNode(conn net.Conn, auth *api.GateAuthorizeResponse, gateway, ticket gossh.Signer, timeout time.Duration) (gossh.Conn, <-chan gossh.NewChannel, <-chan *gossh.Request, error) {
	hostKey := hostdKeyCallback(auth, g.trust.get().internal, g.cfg.Now)
	if g.cfg.NodeTransport == TransportLink {
		lc, chans, reqs, err := sshlink.Client(conn, auth.TerminalAddr, &sshlink.ClientConfig{
			User:            auth.PosixUser,
			Gateway:         gateway,
			Ticket:          ticket,
			HostKeyCallback: hostKey,
			Timeout:         timeout,
		})
		return lc, chans, reqs, err
	}
	return gossh.NewClientConn(conn, auth.TerminalAddr, &gossh.ClientConfig{
		User:            auth.PosixUser,
		AuthCallback:    authSteps(gateway, ticket),
		HostKeyCallback: hostKey,
		ClientVersion:   "SSH-2.0-gpuaas-sshgate",
	})
}

// parseTicket reads the ticket controld returned and checks it certifies
// key (the gateway's own fresh key); hostd checks the rest.
func parseTicket(s string, key gossh.PublicKey) (*gossh.Certificate, error) {
	pub, _, _, _, err := gossh.ParseAuthorizedKey([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("ticket: %w", err)
	}
	cert, ok := pub.(*gossh.Certificate)
	if !ok {
		return nil, fmt.Errorf("ticket: a %s, not a certificate", pub.Type())
	}
	if string(cert.Key.Marshal()) != string(key.Marshal()) {
		return nil, errors.New("ticket: certifies another key")
	}
	return cert, nil
}

// publicError is what the client is told about a failure to reach its
// allocation: the API's message (controld wrote it for users), or a
// generic line for anything internal.
func publicError(err error) error {
	var apiErr *api.Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	return errors.New("cannot reach the allocation's node right now; try again")
}

// authSteps authenticates to a node's terminal server in its two steps:
// the gateway certificate, then the ticket, one public key per attempt
// (no key is offered where it cannot be accepted). A terminal server that
// refuses the gateway certificate outright (one that asks for the ticket
// alone) still gets the ticket.
func authSteps(gateway, ticket gossh.Signer) gossh.ClientAuthCallback {
	var mu sync.Mutex
	steps := []gossh.AuthMethod{gossh.PublicKeys(gateway), gossh.PublicKeys(ticket)}
	return func(*gossh.ClientAuthContext) (gossh.AuthMethod, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(steps) == 0 {
			return nil, errors.New("the node refused the gateway's credentials")
		}
		m := steps[0]
		steps = steps[1:]
		return m, nil
	}
}
