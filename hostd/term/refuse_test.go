package term_test

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/term"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// TestTicketRefused: only a ticket from a trusted CA, for this node, valid
// now, used once, by its POSIX user, gets in; each refusal is for the
// reason the test names (read from the server's log).
func TestTicketRefused(t *testing.T) {
	h := newHarness(t, api.ShapeBaremetal)
	otherCA := sshtest.AuthorityOf(t, api.CAInternal, sshtest.NewKey(t))
	base := sshcert.Ticket{Node: testNode, Allocation: h.alloc, PosixUser: h.user}
	with := func(change func(*sshcert.Ticket)) sshcert.Ticket {
		tk := base
		change(&tk)
		return tk
	}
	userCert := func() gossh.Signer {
		key := sshtest.NewSigner(t)
		cert, err := h.ca.SignUser(key.PublicKey(), sshcert.UserCert{UserID: h.user, KeyID: "u@example.com", MaxTTL: time.Minute}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return sshtest.CertSigner(t, cert, key)
	}
	hostCert := func() gossh.Signer {
		key := sshtest.NewSigner(t)
		cert, err := h.ca.SignHost(key.PublicKey(), []string{h.user}, time.Minute, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return sshtest.CertSigner(t, cert, key)
	}
	tests := []struct {
		name    string
		user    string
		signer  func() gossh.Signer
		wantLog string
	}{
		{"expired ticket", h.user, func() gossh.Signer { return h.ticketFrom(h.ca, base, time.Now().Add(-2*time.Minute)) }, "expired"},
		{"ticket not yet valid", h.user, func() gossh.Signer { return h.ticketFrom(h.ca, base, time.Now().Add(2*time.Minute)) }, "not yet valid"},
		{"ticket for another node", h.user, func() gossh.Signer {
			return h.ticketFrom(h.ca, with(func(tk *sshcert.Ticket) { tk.Node = "n-2" }), time.Now())
		}, "ticket for another node"},
		{"ticket from another CA", h.user, func() gossh.Signer { return h.ticketFrom(otherCA, base, time.Now()) }, "not signed by a trusted authority"},
		{"user certificate without ticket options", h.user, userCert, "critical option not accepted"},
		{"host certificate", h.user, hostCert, "wrong certificate type"},
		{"plain key", h.user, func() gossh.Signer { return sshtest.NewSigner(t) }, "not a certificate"},
		{"ssh user is not the ticket's", "root", func() gossh.Signer { return h.ticketFrom(h.ca, base, time.Now()) }, "user does not match"},
		{"posix user is not the allocation's", "gother", func() gossh.Signer {
			return h.ticketFrom(h.ca, with(func(tk *sshcert.Ticket) { tk.PosixUser = "gother" }), time.Now())
		}, "is not the user of allocation"},
		{"allocation id that is a path", api.PosixUser("../a"), func() gossh.Signer {
			return h.ticketFrom(h.ca, with(func(tk *sshcert.Ticket) { tk.Allocation, tk.PosixUser = "../a", api.PosixUser("../a") }), time.Now())
		}, "invalid allocation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(h.log.String())
			c, err := h.dial(tt.user, gossh.PublicKeys(tt.signer()))
			if err == nil {
				c.Close()
				t.Fatal("got a connection; want it refused")
			}
			if got := h.log.String()[before:]; !strings.Contains(got, tt.wantLog) {
				t.Errorf("got server log %q; want the refusal to say %q", got, tt.wantLog)
			}
		})
	}
}

func TestReplayedTicketRefused(t *testing.T) {
	h := newHarness(t, api.ShapeBaremetal)
	ticket := h.ticket(nil)
	c, err := h.dial(h.user, gossh.PublicKeys(ticket))
	if err != nil {
		t.Fatalf("first use: %v", err)
	}
	c.Close()
	if c, err := h.dial(h.user, gossh.PublicKeys(ticket)); err == nil {
		c.Close()
		t.Fatal("second use of the ticket: got a connection; want it refused")
	}
	if !strings.Contains(h.log.String(), "ticket already used") {
		t.Errorf("got server log %q; want the replay named", h.log.String())
	}
}

// TestCARotation: during a rotation tickets and gateway certificates from
// the old and the new key work; once the old key is dropped its are
// refused.
func TestCARotation(t *testing.T) {
	h := newHarness(t, api.ShapeBaremetal)
	oldCA := h.ca
	newKey := sshtest.NewKey(t)
	newCAOnly := sshtest.AuthorityOf(t, api.CAInternal, newKey)
	tk := sshcert.Ticket{Node: testNode, Allocation: h.alloc, PosixUser: h.user}
	try := func(ca *sshcert.Authority) error {
		c, err := h.dialSteps(h.user, gossh.PublicKeys(h.gatewayFrom(ca, time.Now())), gossh.PublicKeys(h.ticketFrom(ca, tk, time.Now())))
		if err == nil {
			c.Close()
		}
		return err
	}
	h.srv.SetTrusted(sshtest.AuthorityOf(t, api.CAInternal, newKey, oldCA.Active()).Trusted())
	if err := try(oldCA); err != nil {
		t.Errorf("old key during the overlap: %v; want accepted", err)
	}
	if err := try(newCAOnly); err != nil {
		t.Errorf("new key during the overlap: %v; want accepted", err)
	}
	h.srv.SetTrusted(newCAOnly.Trusted())
	if err := try(oldCA); err == nil {
		t.Error("old key after retirement: accepted; want refused")
	}
	if err := try(newCAOnly); err != nil {
		t.Errorf("new key after retirement: %v; want accepted", err)
	}
	h.srv.SetTrusted(nil)
	if err := try(newCAOnly); err == nil {
		t.Error("no trusted keys: accepted; want refused")
	}
}

// craftTicket signs a ticket with the harness CA's key directly, with the
// extensions given (SignTicket always grants the standard ones).
func (h *harness) craftTicket(exts map[string]string) gossh.Signer {
	h.t.Helper()
	key := sshtest.NewSigner(h.t)
	ca, err := gossh.NewSignerFromKey(h.caKey)
	if err != nil {
		h.t.Fatal(err)
	}
	var serial [8]byte
	_, _ = rand.Read(serial[:])
	now := time.Now()
	cert := &gossh.Certificate{
		Key: key.PublicKey(), CertType: gossh.UserCert, KeyId: "crafted",
		Serial: binary.BigEndian.Uint64(serial[:]) | 1, ValidPrincipals: []string{h.user},
		ValidAfter: uint64(now.Add(-30 * time.Second).Unix()), ValidBefore: uint64(now.Add(time.Minute).Unix()),
		Permissions: gossh.Permissions{
			CriticalOptions: map[string]string{
				sshcert.OptionNode: testNode, sshcert.OptionAllocation: h.alloc, sshcert.OptionPosixUser: h.user,
			},
			Extensions: exts,
		},
	}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		h.t.Fatal(err)
	}
	return sshtest.CertSigner(h.t, cert, key)
}

// TestKeyConfusion is CVE-2024-45337 at hostd: a client that offers a
// ticket it cannot use (B) and authenticates with another (A) is served
// as A — A's extensions, A's serial spent — or refused when A is refused.
func TestKeyConfusion(t *testing.T) {
	h := newHarness(t, api.ShapeBaremetal)
	dial := func(methods ...gossh.AuthMethod) (*gossh.Client, error) { return h.dial(h.user, methods...) }

	t.Run("offer B, authenticate with a refused A", func(t *testing.T) {
		b := h.ticket(nil)
		a := h.ticket(func(tk *sshcert.Ticket) { tk.Node = "n-2" })
		if c, err := dial(gossh.PublicKeys(sshtest.OfferOnly(b)), gossh.PublicKeys(a)); err == nil {
			c.Close()
			t.Fatal("got a connection; want it refused")
		}
		// B was never proven, so never spent: its holder can still use it.
		c, err := h.dial(h.user, gossh.PublicKeys(b))
		if err != nil {
			t.Fatalf("B after the attempt: %v; want accepted", err)
		}
		c.Close()
	})

	t.Run("offer B, authenticate with A", func(t *testing.T) {
		b := h.ticket(nil)                      // may forward and have a PTY
		a := h.craftTicket(map[string]string{}) // may do neither
		c, err := dial(gossh.PublicKeys(sshtest.OfferOnly(b)), gossh.PublicKeys(a))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if conn, err := c.Dial("tcp", "127.0.0.1:9"); err == nil {
			conn.Close()
			t.Error("direct-tcpip: got a channel with B's extension; want A's refusal")
		} else if !strings.Contains(err.Error(), "port forwarding refused") {
			t.Errorf("direct-tcpip: got %v; want port forwarding refused", err)
		}
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.RequestPty("xterm", 24, 80, nil); err == nil {
			t.Error("pty-req: accepted with B's extension; want A's refusal")
		}
		if err := s.Run("true"); err != nil {
			t.Errorf("exec as A: %v", err)
		}
		if c, err := h.dial(h.user, gossh.PublicKeys(a)); err == nil {
			c.Close()
			t.Error("A again: accepted; want refused as replayed")
		}
		c2, err := h.dial(h.user, gossh.PublicKeys(b))
		if err != nil {
			t.Fatalf("B after the attempt: %v; want accepted (never spent)", err)
		}
		c2.Close()
	})
}

// TestRefusedChannelsAndRequests: only session and direct-tcpip channels,
// remote forwards on loopback only, and only the allow-listed requests in
// a session, for both shapes, over SSH and over a link.
func TestRefusedChannelsAndRequests(t *testing.T) {
	eachHarness(t, func(t *testing.T, h *harness) {
		c := h.client()
		for _, typ := range []string{"x11", "auth-agent@openssh.com", "forwarded-tcpip",
			"direct-streamlocal@openssh.com", "forwarded-streamlocal@openssh.com", "tun@openssh.com", "gpuaas"} {
			ch, _, err := c.OpenChannel(typ, nil)
			var oce *gossh.OpenChannelError
			if !errors.As(err, &oce) || oce.Reason != gossh.UnknownChannelType {
				t.Errorf("channel %s: got %v; want rejected as an unknown channel type", typ, err)
			}
			if ch != nil {
				ch.Close()
			}
		}
		// Remote forwards listen on loopback only, from port 1024, and
		// only a forward that exists can be cancelled.
		for _, r := range []struct {
			typ  string
			addr string
			port uint32
		}{
			{"tcpip-forward", "10.0.0.1", 0}, {"tcpip-forward", "example.com", 0}, {"tcpip-forward", "127.0.0.1", 80},
			{"cancel-tcpip-forward", "127.0.0.1", 0}, {"streamlocal-forward@openssh.com", "127.0.0.1", 0}, {"gpuaas", "127.0.0.1", 0},
		} {
			ok, _, err := c.SendRequest(r.typ, true, gossh.Marshal(struct {
				Addr string
				Port uint32
			}{r.addr, r.port}))
			if ok || err != nil {
				t.Errorf("global request %s %s:%d: got ok %v, error %v; want refused", r.typ, r.addr, r.port, ok, err)
			}
		}

		ch, reqs, err := c.OpenChannel("session", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		go gossh.DiscardRequests(reqs)
		type name struct{ Name string }
		refused := []struct {
			typ     string
			payload []byte
		}{
			{"x11-req", gossh.Marshal(struct {
				Single        bool
				Proto, Cookie string
				Screen        uint32
			}{false, "MIT-MAGIC-COOKIE-1", "00", 0})},
			{"break", gossh.Marshal(struct{ Ms uint32 }{100})},
			{"subsystem", gossh.Marshal(name{"gpuaas"})},
			{"subsystem", gossh.Marshal(name{"SFTP"})},
			{"env", gossh.Marshal(struct{ Name, Value string }{"LD_PRELOAD", "x.so"})},
			{"xon-xoff", gossh.Marshal(struct{ On bool }{true})},
			{"exit-status", gossh.Marshal(struct{ Status uint32 }{0})},
			{"gpuaas@example.com", nil},
		}
		for _, r := range refused {
			ok, err := ch.SendRequest(r.typ, true, r.payload)
			if ok || err != nil {
				t.Errorf("session request %s: got ok %v, error %v; want refused", r.typ, ok, err)
			}
		}
		// The session still works, once.
		if ok, err := ch.SendRequest("exec", true, gossh.Marshal(struct{ Cmd string }{"sleep 5"})); !ok || err != nil {
			t.Fatalf("exec: got ok %v, error %v; want accepted", ok, err)
		}
		for _, typ := range []string{"exec", "shell"} {
			if ok, _ := ch.SendRequest(typ, true, gossh.Marshal(struct{ Cmd string }{"true"})); ok {
				t.Errorf("a second %s on a running session: accepted; want refused", typ)
			}
		}
	})
}

// TestHandshakeTimeout: a client that connects and never authenticates
// is dropped.
func TestHandshakeTimeout(t *testing.T) {
	users, err := sim.NewUsers(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := term.New(term.Config{StateDir: t.TempDir(), Accounts: term.SandboxAccounts{Home: users.Home},
		HandshakeTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c) // the banner, then EOF when the server gives up
	if err != nil {
		t.Fatalf("got %v after %q; want the connection closed by the server", err, b)
	}
	if !strings.HasPrefix(string(b), "SSH-2.0-") {
		t.Errorf("got %q; want an SSH banner before the close", b)
	}
}

// TestForwardingNeedsTicketExtensions: remote forwarding (tcpip-forward)
// needs permit-port-forwarding and agent forwarding permit-agent-forwarding
// in the ticket, for both shapes, over SSH and over a link; with them both
// are granted.
func TestForwardingNeedsTicketExtensions(t *testing.T) {
	eachHarness(t, func(t *testing.T, h *harness) {
		try := func(c *gossh.Client) (forward, agent bool) {
			t.Helper()
			forward, _, err := c.SendRequest("tcpip-forward", true, gossh.Marshal(struct {
				Addr string
				Port uint32
			}{"127.0.0.1", 0}))
			if err != nil {
				t.Fatal(err)
			}
			ch, reqs, err := c.OpenChannel("session", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Close()
			go gossh.DiscardRequests(reqs)
			agent, err = ch.SendRequest("auth-agent-req@openssh.com", true, nil)
			if err != nil {
				t.Fatal(err)
			}
			return forward, agent
		}
		bare, err := h.connect(h.user, h.craftTicket(map[string]string{sshcert.ExtensionPermitPTY: ""}))
		if err != nil {
			t.Fatal(err)
		}
		defer bare.Close()
		if fwd, agent := try(bare); fwd || agent {
			t.Errorf("without the extensions: forward %v, agent %v; want both refused", fwd, agent)
		}
		if fwd, agent := try(h.client()); !fwd || !agent {
			t.Errorf("with the standard extensions: forward %v, agent %v; want both granted", fwd, agent)
		}
	})
}
