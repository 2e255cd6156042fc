package core

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshlink"
)

// Grant names who asks to reach which allocation: what gate.authorize
// decides on.
type Grant struct {
	// AllocationID is the allocation to reach.
	AllocationID string
	// UserID is the user asking, as the front authenticated them.
	UserID string
	// Certificate is the user certificate the front authenticated the
	// user with, authorized_keys format, for controld to verify again.
	Certificate string
	// HTTP, set by the HTTPS front instead of Certificate, has controld
	// decide on an exposure's host name and a request's credential
	// (gate.authorize_http); UserID is then informational.
	HTTP *HTTPGrant
}

// Link is an authorized connection to an allocation's node: the gateway
// link (or a second SSH connection, TransportSSH), used as an SSH
// connection either way. Closing Conn ends it.
type Link struct {
	// Auth is controld's answer: the node, its terminal address, the
	// allocation's POSIX user, the banner for people.
	Auth *gateproto.GateAuthorizeResponse
	Conn gossh.Conn
	// Chans and Reqs are what the node opens and asks; the owner of the
	// link must serve them (or discard them with gossh.DiscardRequests and
	// rejections), or the connection stalls.
	Chans <-chan gossh.NewChannel
	Reqs  <-chan *gossh.Request
}

// Authorize asks controld whether g.UserID may open g.AllocationID and,
// with the ticket it returns for a key made for this link alone, dials
// the node's terminal server as the allocation's POSIX user: the gateway
// certificate first, then the ticket, the terminal's host key pinned.
func (c *Core) Authorize(ctx context.Context, g Grant) (*Link, error) {
	d, err := c.decide(ctx, g)
	if err != nil {
		return nil, err
	}
	return c.dialNode(ctx, g, d)
}

// decision is controld's answer to a grant: where the node is, and the
// ticket (for a key made for it alone) that lets one link in.
type decision struct {
	auth   *gateproto.GateAuthorizeResponse
	ticket *gossh.Certificate
	signer gossh.Signer // the ticket with its key
	// login is the login controld allowed, when the grant names one
	// (zero for a public exposure's anonymous request).
	login gateproto.GateSession
}

// decide asks controld for g's verdict and a ticket for a fresh key.
func (c *Core) decide(ctx context.Context, g Grant) (*decision, error) {
	alloc := g.AllocationID
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ticket key: %w", err)
	}
	key, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("ticket key: %w", err)
	}
	ticketKey := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(key.PublicKey())))
	var auth *gateproto.GateAuthorizeResponse
	var login gateproto.GateSession
	if g.HTTP != nil {
		auth, login, err = c.authorizeHTTP(ctx, g, ticketKey)
	} else {
		login = certLogin(g)
		auth, err = gateproto.GateAuthorize(ctx, c.cfg.Client, authorizeRequest(g, ticketKey))
	}
	if err != nil {
		return nil, fmt.Errorf("authorize %s: %w", alloc, err)
	}
	if !answersFor(auth, alloc) {
		return nil, fmt.Errorf("authorize %s: controld answered for %q", alloc, auth.AllocationID)
	}
	ticket, err := ParseTicket(auth.Ticket, key.PublicKey())
	if err != nil {
		return nil, fmt.Errorf("authorize %s: %w", alloc, err)
	}
	ticketSigner, err := gossh.NewCertSigner(ticket, key)
	if err != nil {
		return nil, fmt.Errorf("authorize %s: ticket: %w", alloc, err)
	}
	return &decision{auth: auth, ticket: ticket, signer: ticketSigner, login: login}, nil
}

// dialNode dials the node of decision d with its ticket.
func (c *Core) dialNode(ctx context.Context, g Grant, d *decision) (*Link, error) {
	alloc, auth := g.AllocationID, d.auth
	gatewaySigner, err := c.creds.current(c.cfg.Now())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", alloc, err)
	}
	ts := c.trust.get()
	if ts == nil {
		return nil, fmt.Errorf("open %s: %w", alloc, ErrNoTrust)
	}
	dialCtx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	var dl net.Dialer
	conn, err := dl.DialContext(dialCtx, "tcp", auth.TerminalAddr)
	if err != nil {
		return nil, fmt.Errorf("dial node %s at %s: %w", auth.NodeID, auth.TerminalAddr, err)
	}
	// The handshake gets the same deadline as the dial.
	deadline, _ := dialCtx.Deadline()
	_ = conn.SetDeadline(deadline)
	cc, chans, reqs, err := c.handshakeNode(conn, auth, ts, gatewaySigner, d.signer, time.Until(deadline))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s to node %s at %s: %w", c.cfg.NodeTransport, auth.NodeID, auth.TerminalAddr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	c.log.Info("connected to node", "allocation", alloc, "user", g.UserID, "node", auth.NodeID,
		"addr", auth.TerminalAddr, "posix_user", auth.PosixUser, "transport", c.cfg.NodeTransport)
	return &Link{Auth: auth, Conn: cc, Chans: chans, Reqs: reqs}, nil
}

// handshakeNode authenticates to the node's terminal server on conn over
// the configured transport, within timeout: the gateway certificate, then
// the ticket, the terminal's host key pinned either way.
func (c *Core) handshakeNode(conn net.Conn, auth *gateproto.GateAuthorizeResponse, ts *TrustSet, gateway, ticket gossh.Signer, timeout time.Duration) (gossh.Conn, <-chan gossh.NewChannel, <-chan *gossh.Request, error) {
	hostKey := HostdKeyCallback(auth, ts.Internal, c.cfg.Now)
	if c.cfg.NodeTransport == TransportLink {
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
		AuthCallback:    AuthSteps(gateway, ticket),
		HostKeyCallback: hostKey,
		ClientVersion:   "SSH-2.0-gpuaas-sshgate",
	})
}

// ParseTicket reads the ticket controld returned and checks it certifies
// key (the gateway's own fresh key); hostd checks the rest.
func ParseTicket(s string, key gossh.PublicKey) (*gossh.Certificate, error) {
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

// AuthSteps authenticates to a node's terminal server in its two steps:
// the gateway certificate, then the ticket, one public key per attempt
// (no key is offered where it cannot be accepted). A terminal server that
// refuses the gateway certificate outright (one that asks for the ticket
// alone) still gets the ticket.
func AuthSteps(gateway, ticket gossh.Signer) gossh.ClientAuthCallback {
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
