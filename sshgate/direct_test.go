package sshgate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// TestStolenGatewayTokenOpensNoShell is the regression test of "with a
// stolen gateway token, gate.authorize issued a ticket for the attacker's
// own key, and ssh straight to hostd's terminal port gave a shell in
// another user's allocation, bypassing sshgate and its recording", against
// controld, a real hostd agent and hostd's terminal server: the ticket is
// still minted (the token is valid), but hostd asks for a gateway
// certificate first, the token cannot have the attacker's key certified
// as a gateway, and a gateway certificate from any other CA is refused.
// The way through the gateway keeps working.
func TestStolenGatewayTokenOpensNoShell(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Postgres, controld and two sim hosts")
	}
	s := startRealStack(t, nil)
	ctx := context.Background()
	owner := s.login(s.admin, s.env.Admin.ID)
	metal := s.createAlloc(s.admin, "h100-baremetal", 8)

	// The token a registered gateway logs in for, stolen and used from
	// elsewhere.
	gwc, _ := s.env.Gateway(t, "sshgate-stolen")
	tok, err := gwc.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stolen := s.env.Client(tok)
	key := sshtest.NewSigner(t)
	keyLine := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(key.PublicKey())))
	// A user's certificate is no secret: the attacker has a copy.
	ownerCert := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(owner.cert)))
	auth, err := gateproto.GateAuthorize(ctx, stolen, gateproto.GateAuthorizeRequest{AllocationID: metal.ID, UserID: owner.id, TicketKey: keyLine,
		Certificate: ownerCert})
	if err != nil {
		t.Fatal(err)
	}
	ticketCert, err := core.ParseTicket(auth.Ticket, key.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	ticket := sshtest.CertSigner(t, ticketCert, key)
	hostKey, _, _, _, err := gossh.ParseAuthorizedKey([]byte(auth.TerminalHostKey))
	if err != nil {
		t.Fatal(err)
	}
	direct := func(cfg *gossh.ClientConfig) error {
		cfg.User, cfg.HostKeyCallback, cfg.Timeout = auth.PosixUser, gossh.FixedHostKey(hostKey), 10*time.Second
		c, err := gossh.Dial("tcp", auth.TerminalAddr, cfg)
		if err == nil {
			_, _, _, rerr := sshtest.Run(t, c, "id")
			c.Close()
			return errors.Join(errors.New("got a connection to the node"), rerr)
		}
		return nil
	}

	if err := direct(&gossh.ClientConfig{Auth: []gossh.AuthMethod{gossh.PublicKeys(ticket)}}); err != nil {
		t.Fatalf("a valid ticket, no gateway certificate: %v; want refused", err)
	}
	if _, err := gateproto.GateCredentials(ctx, stolen, gateproto.GateCredentialsRequest{PublicKey: keyLine}); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("gate.credentials for the attacker's key: got %v; want forbidden", err)
	}
	fakeCAKey, err := sshcert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	fakeCA, err := sshcert.New(api.CAInternal, fakeCAKey)
	if err != nil {
		t.Fatal(err)
	}
	gwKey := sshtest.NewSigner(t)
	fakeGW, err := fakeCA.SignGateway(gwKey.PublicKey(), "gw-test", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := direct(&gossh.ClientConfig{AuthCallback: core.AuthSteps(sshtest.CertSigner(t, fakeGW, gwKey), ticket)}); err != nil {
		t.Fatalf("a gateway certificate of the attacker's CA and a valid ticket: %v; want refused", err)
	}

	out, _, status, err := sshtest.Run(t, s.dial(owner, metal.ID), "echo through-the-gateway")
	if err != nil || status != 0 || out != "through-the-gateway\n" {
		t.Fatalf("through the gateway: got %q, %d, %v", out, status, err)
	}
}
