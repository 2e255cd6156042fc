package term_test

import (
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// TestGatewayRequired is the regression test of "ssh straight to hostd's
// terminal port with a ticket gave a shell, bypassing sshgate": a valid
// ticket for a key the client holds opens nothing without a gateway
// certificate proven first, a gateway certificate opens nothing without a
// ticket, and the steps must come in that order. Each refusal is checked
// against the server's log.
func TestGatewayRequired(t *testing.T) {
	h := newHarness(t, api.ShapeBaremetal)
	otherCA := sshtest.AuthorityOf(t, api.CAInternal, sshtest.NewKey(t))
	tests := []struct {
		name    string
		steps   func() []gossh.AuthMethod
		wantLog string
	}{
		{"valid ticket, no gateway certificate", func() []gossh.AuthMethod {
			return []gossh.AuthMethod{gossh.PublicKeys(h.ticket(nil))}
		}, "not a gateway certificate"},
		{"gateway certificate, no ticket", func() []gossh.AuthMethod {
			return []gossh.AuthMethod{gossh.PublicKeys(h.gateway)}
		}, "terminal gateway authenticated"},
		{"gateway certificate twice", func() []gossh.AuthMethod {
			return []gossh.AuthMethod{gossh.PublicKeys(h.gateway), gossh.PublicKeys(h.gateway)}
		}, "critical option not accepted"},
		{"gateway certificate, ticket for another node", func() []gossh.AuthMethod {
			return []gossh.AuthMethod{gossh.PublicKeys(h.gateway),
				gossh.PublicKeys(h.ticket(func(tk *sshcert.Ticket) { tk.Node = "n-2" }))}
		}, "ticket for another node"},
		{"ticket first, then the gateway certificate", func() []gossh.AuthMethod {
			return []gossh.AuthMethod{gossh.PublicKeys(h.ticket(nil)), gossh.PublicKeys(h.gateway)}
		}, "not a gateway certificate"},
		{"gateway certificate of another CA", func() []gossh.AuthMethod {
			return []gossh.AuthMethod{gossh.PublicKeys(h.gatewayFrom(otherCA, time.Now())), gossh.PublicKeys(h.ticket(nil))}
		}, "not signed by a trusted authority"},
		{"expired gateway certificate", func() []gossh.AuthMethod {
			return []gossh.AuthMethod{gossh.PublicKeys(h.gatewayFrom(h.ca, time.Now().Add(-2*time.Hour))), gossh.PublicKeys(h.ticket(nil))}
		}, "expired"},
		{"gateway certificate offered but not proven, ticket proven", func() []gossh.AuthMethod {
			return []gossh.AuthMethod{gossh.PublicKeys(sshtest.OfferOnly(h.gateway)), gossh.PublicKeys(h.ticket(nil))}
		}, "not a gateway certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(h.log.String())
			c, err := h.dialSteps(h.user, tt.steps()...)
			if err == nil {
				c.Close()
				t.Fatal("got a connection; want it refused")
			}
			if got := h.log.String()[before:]; !strings.Contains(got, tt.wantLog) {
				t.Errorf("got server log %q; want it to say %q", got, tt.wantLog)
			}
		})
	}

	t.Run("a ticket refused for want of a gateway is not spent", func(t *testing.T) {
		ticket := h.ticket(nil)
		if c, err := h.dialSteps(h.user, gossh.PublicKeys(ticket)); err == nil {
			c.Close()
			t.Fatal("ticket alone: got a connection; want it refused")
		}
		c, err := h.dial(h.user, gossh.PublicKeys(ticket))
		if err != nil {
			t.Fatalf("the same ticket through a gateway: %v; want accepted", err)
		}
		c.Close()
	})
	t.Run("both keys in one method, gateway first", func(t *testing.T) {
		c, err := gossh.Dial("tcp", h.addr, &gossh.ClientConfig{User: h.user,
			Auth:            []gossh.AuthMethod{gossh.PublicKeys(h.gateway, h.ticket(nil))},
			HostKeyCallback: gossh.FixedHostKey(h.hostKey), Timeout: 10 * time.Second})
		if err != nil {
			t.Fatalf("got %v; want accepted", err)
		}
		defer c.Close()
		if err := runTrue(c); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(h.log.String(), "gateway=test-gw") {
			t.Errorf("server log %q does not name the gateway", h.log.String())
		}
	})
}

func runTrue(c *gossh.Client) error {
	s, err := c.NewSession()
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Run("true")
}
