package gate_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// authorize asks gate.authorize, as the gateway, for u's certificate
// cert on the world's allocation, with a fresh ticket key.
func (w *world) authorize(t *testing.T, u api.User, cert string) (*gateproto.GateAuthorizeResponse, ssh.PublicKey, error) {
	t.Helper()
	key, _ := newKey(t)
	resp, err := endpointtest.Read[gateproto.GateAuthorizeResponse](context.Background(), endpointtest.Find(t, w.defs, gateproto.EndpointGateAuthorize),
		w.gateway, gateproto.GateAuthorizeRequest{AllocationID: w.alloc, UserID: u.ID, TicketKey: string(ssh.MarshalAuthorizedKey(key)), Certificate: cert})
	return resp, key, err
}

// TestAuthorizeNeedsALiveLogin: the allocation's creator, with a
// certificate of a live login, gets a ticket of the internal CA for the
// gateway's key, naming the node, the allocation and its POSIX user, and
// is told where the node's terminal is; the grant is audited under the
// gateway. Once that login is logged out, the same certificate (still
// within its validity) is refused as forbidden, and the refusal is
// audited on its own with the login session it named.
func TestAuthorizeNeedsALiveLogin(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	cert := w.userCert(t, w.owner, w.ownerSess)
	resp, key, err := w.authorize(t, w.owner, cert)
	if err != nil {
		t.Fatalf("authorize with a live login: %v", err)
	}
	if resp.NodeID != w.node || resp.TerminalAddr != w.terminalAddr || resp.TerminalHostKey != w.hostKey ||
		resp.PosixUser != api.PosixUser(w.alloc) || resp.AllocationID != w.alloc {
		t.Fatalf("authorize: %+v; want node %s at %s as %s", resp, w.node, w.terminalAddr, api.PosixUser(w.alloc))
	}
	ic, err := w.cas.Authority(ctx, w.pool, api.CAInternal)
	if err != nil {
		t.Fatal(err)
	}
	ticket, _, _, _, err := ssh.ParseAuthorizedKey([]byte(resp.Ticket))
	if err != nil {
		t.Fatal(err)
	}
	got, err := sshcert.VerifyTicket(ic.Trusted(), ticket, w.node, now)
	if err != nil || got.Allocation != w.alloc || got.PosixUser != api.PosixUser(w.alloc) {
		t.Fatalf("ticket: %+v, %v; want one for %s on %s", got, err, w.alloc, w.node)
	}
	if c := ticket.(*ssh.Certificate); !slices.Equal(c.Key.Marshal(), key.Marshal()) {
		t.Fatal("the ticket certifies another key than the gateway's")
	}
	gw := w.gateway.Principal.UserID
	if a := w.audits(t); !slices.Equal(a, []string{"gate.authorize " + w.alloc + " " + gw}) {
		t.Fatalf("audit after the grant: %q", a)
	}
	// The grant's audit row names the ticket it signed.
	var serial uint64
	if err := w.pool.QueryRow(ctx, `SELECT (detail->>'serial')::numeric FROM audit_logs WHERE action = 'gate.authorize'`).Scan(&serial); err != nil ||
		serial != ticket.(*ssh.Certificate).Serial {
		t.Fatalf("audit serial %d, %v; want the ticket's %d", serial, err, ticket.(*ssh.Certificate).Serial)
	}

	if err := identity.Revoke(ctx, w.pool, w.ownerSess, now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.authorize(t, w.owner, cert); api.CodeOf(err) != api.CodeForbidden || !strings.Contains(err.Error(), "logged out") {
		t.Fatalf("authorize after logout: %v; want forbidden, this login was ended", err)
	}
	want := []string{"gate.authorize " + w.alloc + " " + gw, "gate.authorize_refused " + w.alloc + " " + gw}
	if a := w.audits(t); !slices.Equal(a, want) {
		t.Fatalf("audit after the refusal: %q; want %q", a, want)
	}
	code, req := w.refusal(t, "gate.authorize_refused")
	if code != string(api.CodeForbidden) || req["session_id"] != w.ownerSess || req["user_id"] != w.owner.ID {
		t.Fatalf("refusal's audit: code %s, request %v; want forbidden naming %s", code, req, w.ownerSess)
	}
}

// TestAuthorizeNeedsOwnerOrMember: a project member who did not create
// the allocation gets a ticket; a viewer of the project, with a
// certificate of a live login, is refused as forbidden (a viewer may
// look, not log in), nothing is minted, and the refusal is audited with
// the allocation's project.
func TestAuthorizeNeedsOwnerOrMember(t *testing.T) {
	w := newWorld(t)
	if _, _, err := w.authorize(t, w.member, w.userCert(t, w.member, w.memberSess)); err != nil {
		t.Fatalf("a member's authorize: %v", err)
	}
	resp, _, err := w.authorize(t, w.viewer, w.userCert(t, w.viewer, w.viewerSess))
	if api.CodeOf(err) != api.CodeForbidden || resp != nil {
		t.Fatalf("a viewer's authorize: %+v, %v; want forbidden", resp, err)
	}
	gw := w.gateway.Principal.UserID
	want := []string{"gate.authorize " + w.alloc + " " + gw, "gate.authorize_refused " + w.alloc + " " + gw}
	if a := w.audits(t); !slices.Equal(a, want) {
		t.Fatalf("audit: %q; want %q", a, want)
	}
	code, req := w.refusal(t, "gate.authorize_refused")
	if code != string(api.CodeForbidden) || req["user_id"] != w.viewer.ID {
		t.Fatalf("refusal's audit: code %s, request %v; want forbidden for %s", code, req, w.viewer.ID)
	}
	var project string
	if err := w.pool.QueryRow(context.Background(), `SELECT project_id FROM audit_logs WHERE action = 'gate.authorize_refused'`).Scan(&project); err != nil || project != w.project {
		t.Fatalf("refusal's project: %q, %v; want %s", project, err, w.project)
	}
}
