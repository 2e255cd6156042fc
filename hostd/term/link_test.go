package term_test

import (
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshlink"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// TestLinkRefused: a link gets in on exactly the terms an SSH connection
// does — a gateway certificate of a trusted CA proven first, then a valid
// ticket for this node and its POSIX user — and each refusal is for the
// reason the test names (read from the server's log).
func TestLinkRefused(t *testing.T) {
	h := newHarness(t, api.ShapeBaremetal)
	otherCA := sshtest.AuthorityOf(t, api.CAInternal, sshtest.NewKey(t))
	base := sshcert.Ticket{Node: testNode, Allocation: h.alloc, PosixUser: h.user}
	tests := []struct {
		name            string
		user            string
		gateway, ticket func() gossh.Signer
		wantLog         string
	}{
		{"expired ticket", h.user, h.gatewaySigner, func() gossh.Signer { return h.ticketFrom(h.ca, base, time.Now().Add(-2*time.Minute)) }, "expired"},
		{"ticket for another node", h.user, h.gatewaySigner, func() gossh.Signer {
			return h.ticket(func(tk *sshcert.Ticket) { tk.Node = "n-2" })
		}, "ticket for another node"},
		{"ticket from another CA", h.user, h.gatewaySigner, func() gossh.Signer { return h.ticketFrom(otherCA, base, time.Now()) }, "not signed by a trusted authority"},
		{"plain key as the ticket", h.user, h.gatewaySigner, func() gossh.Signer { return sshtest.NewSigner(t) }, "not a certificate"},
		{"user is not the ticket's", "root", h.gatewaySigner, func() gossh.Signer { return h.ticket(nil) }, "user does not match"},
		{"no gateway step: the ticket in its place", h.user, func() gossh.Signer { return h.ticket(nil) }, func() gossh.Signer { return h.ticket(nil) }, "not a gateway certificate"},
		{"gateway certificate of another CA", h.user, func() gossh.Signer { return h.gatewayFrom(otherCA, time.Now()) }, func() gossh.Signer { return h.ticket(nil) }, "not a gateway certificate"},
		{"expired gateway certificate", h.user, func() gossh.Signer { return h.gatewayFrom(h.ca, time.Now().Add(-2*time.Hour)) }, func() gossh.Signer { return h.ticket(nil) }, "expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(h.log.String())
			c, err := h.dialLink(tt.user, tt.gateway(), tt.ticket(), gossh.FixedHostKey(h.hostKey))
			if err == nil {
				c.Close()
				t.Fatal("got a link; want it refused")
			}
			if !errors.Is(err, sshlink.ErrAuth) {
				t.Errorf("got %v; want an authentication failure", err)
			}
			got := h.log.String()[before:]
			if !strings.Contains(got, tt.wantLog) || !strings.Contains(got, "transport=link") {
				t.Errorf("got server log %q; want the link's refusal to say %q", got, tt.wantLog)
			}
			if strings.Contains(got, "ticket accepted") {
				t.Errorf("got server log %q; want no ticket accepted", got)
			}
		})
	}
}

// gatewaySigner is the harness's gateway certificate.
func (h *harness) gatewaySigner() gossh.Signer { return h.gateway }

// TestLinkReplayedTicketRefused: a ticket opens one link, or one SSH
// connection, once; the serial is shared by both transports.
func TestLinkReplayedTicketRefused(t *testing.T) {
	h := newHarness(t, api.ShapeBaremetal)
	ticket := h.ticket(nil)
	c, err := h.dialLink(h.user, h.gateway, ticket, gossh.FixedHostKey(h.hostKey))
	if err != nil {
		t.Fatalf("first use: %v", err)
	}
	c.Close()
	before := len(h.log.String())
	if c, err := h.dialLink(h.user, h.gateway, ticket, gossh.FixedHostKey(h.hostKey)); err == nil {
		c.Close()
		t.Fatal("second use over a link: got a link; want it refused")
	}
	if got := h.log.String()[before:]; !strings.Contains(got, "ticket already used") {
		t.Errorf("second use over a link: got server log %q; want the replay named", got)
	}
	before = len(h.log.String())
	if c, err := h.dial(h.user, gossh.PublicKeys(ticket)); err == nil {
		c.Close()
		t.Fatal("second use over SSH: got a connection; want it refused")
	}
	if got := h.log.String()[before:]; !strings.Contains(got, "ticket already used") {
		t.Errorf("second use over SSH: got server log %q; want the replay named", got)
	}
}

// TestLinkHostKeyPinned: the gateway checks the TLS certificate's key
// against the terminal's pinned SSH host key; another key is refused
// before the gateway proves anything, and the ticket is not spent.
func TestLinkHostKeyPinned(t *testing.T) {
	h := newHarness(t, api.ShapeBaremetal)
	ticket := h.ticket(nil)
	other := sshtest.NewSigner(t).PublicKey()
	c, err := h.dialLink(h.user, h.gateway, ticket, gossh.FixedHostKey(other))
	if err == nil {
		c.Close()
		t.Fatal("another pinned key: got a link; want it refused")
	}
	if !errors.Is(err, sshlink.ErrHostKey) {
		t.Errorf("another pinned key: got %v; want the host key refused", err)
	}
	// Nor does a ticket refused for a bad gateway step get spent.
	if c, err := h.dialLink(h.user, h.gatewayFrom(h.ca, time.Now().Add(-2*time.Hour)), ticket, gossh.FixedHostKey(h.hostKey)); err == nil {
		c.Close()
		t.Fatal("expired gateway certificate: got a link; want it refused")
	}
	c, err = h.dialLink(h.user, h.gateway, ticket, gossh.FixedHostKey(h.hostKey))
	if err != nil {
		t.Fatalf("the same ticket, pinned key and valid gateway: %v; want accepted", err)
	}
	defer c.Close()
	out, _, status, err := sshtest.Run(t, c, "echo $USER")
	if err != nil || status != 0 || strings.TrimSpace(out) != h.user {
		t.Errorf("got %q, status %d, %v; want the allocation's user %q", out, status, err, h.user)
	}
}

// TestLinkClosedWithServer: closing the terminal server ends its links, as
// it ends SSH connections.
func TestLinkClosedWithServer(t *testing.T) {
	h := newHarnessOver(t, api.ShapeBaremetal, "link")
	c := h.client()
	if _, _, status, err := sshtest.Run(t, c, "true"); err != nil || status != 0 {
		t.Fatalf("true: status %d, %v", status, err)
	}
	ended := make(chan error, 1)
	go func() { ended <- c.Wait() }()
	if err := h.srv.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the link outlived the server's Close")
	}
}

// TestLinkChannelRequestRefusedNotPanicking is the regression test of a
// channel request wanting a reply on a link's direct-tcpip channel: its
// requests were drained by gossh.DiscardRequests, whose req.Reply panics
// on a link's request (it has no x/crypto mux), taking hostd down. The
// request must be refused and the channel and the link go on.
func TestLinkChannelRequestRefusedNotPanicking(t *testing.T) {
	h := newHarnessOver(t, api.ShapeBaremetal, "link")
	c := h.client()
	echo := sshtest.ListenEcho(t)
	host, port, err := net.SplitHostPort(echo)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	ch, reqs, err := c.OpenChannel("direct-tcpip", gossh.Marshal(sshwire.DirectTCPIPMsg{DestAddr: host, DestPort: uint32(p), OriginAddr: "127.0.0.1", OriginPort: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	go gossh.DiscardRequests(reqs)
	if ok, err := ch.SendRequest("gpuaas@example.com", true, nil); ok || err != nil {
		t.Fatalf("channel request: got ok %v, error %v; want refused", ok, err)
	}
	if _, err := ch.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(ch, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("got %q, %v; want ping echoed after the refusal", buf, err)
	}
}
