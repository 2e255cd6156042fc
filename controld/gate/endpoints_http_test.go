package gate_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/exposures"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// TestAuthorizeHTTPRefusesAReleasedAllocation: a member's login gets
// "allow" for a project-shared exposure of an active allocation, and with
// a ticket key a ticket for the node, audited; once the allocation is
// released the same question is answered "gone" — an answer, not an
// error — with no ticket, and nothing more is audited.
func TestAuthorizeHTTPRefusesAReleasedAllocation(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	e, err := exposures.Create(ctx, w.pool, exposures.CreateArgs{ProjectID: w.project, AllocationID: w.alloc, Port: 8888,
		Share: api.ShareProject, TTL: time.Hour, ActorID: w.owner.ID}, now)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := newKey(t)
	req := gateproto.GateAuthorizeHTTPRequest{Host: "8888-" + w.alloc, SessionID: w.memberSess, UserID: w.member.ID,
		TicketKey: string(ssh.MarshalAuthorizedKey(key))}
	ask := endpointtest.Find(t, w.defs, gateproto.EndpointGateAuthorizeHTTP)
	v, err := endpointtest.Read[gateproto.GateAuthorizeHTTPResponse](ctx, ask, w.gateway, req)
	if err != nil || v.Verdict != gateproto.VerdictAllow || v.Auth == nil || v.Auth.NodeID != w.node || v.Exposure == nil || v.Exposure.ID != e.ID {
		t.Fatalf("a member's request while active: %+v, %v; want allow with a ticket to %s", v, err, w.node)
	}
	gw := w.gateway.Principal.UserID
	granted := []string{gateproto.EndpointGateAuthorizeHTTP + " " + w.alloc + " " + gw}
	if a := w.audits(t); !slices.Equal(a, granted) {
		t.Fatalf("audit after the ticket: %q; want %q", a, granted)
	}

	if _, err := w.pool.Exec(ctx, `UPDATE allocations SET state = $2 WHERE id = $1`, w.alloc, api.AllocReleased); err != nil {
		t.Fatal(err)
	}
	v, err = endpointtest.Read[gateproto.GateAuthorizeHTTPResponse](ctx, ask, w.gateway, req)
	if err != nil || v.Verdict != gateproto.VerdictGone || v.Auth != nil {
		t.Fatalf("the request once released: %+v, %v; want gone, no ticket", v, err)
	}
	if want := "allocation " + w.alloc + " is " + api.AllocReleased; v.Reason != want {
		t.Errorf("reason: %q; want %q", v.Reason, want)
	}
	if a := w.audits(t); !slices.Equal(a, granted) {
		t.Fatalf("audit after the verdict: %q; want %q unchanged", a, granted)
	}
}

// TestAuthorizeHTTPVerdictsFollowTheShare: a viewer's login is
// "forbidden" on a project-shared exposure (owners and members only), a
// request without a login is sent to log in, a port not exposed is
// "not_found", and a malformed host is invalid_argument; none is audited.
func TestAuthorizeHTTPVerdictsFollowTheShare(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	if _, err := exposures.Create(ctx, w.pool, exposures.CreateArgs{ProjectID: w.project, AllocationID: w.alloc, Port: 8888,
		Share: api.ShareProject, TTL: time.Hour, ActorID: w.owner.ID}, now); err != nil {
		t.Fatal(err)
	}
	ask := endpointtest.Find(t, w.defs, gateproto.EndpointGateAuthorizeHTTP)
	host := "8888-" + w.alloc
	for name, tc := range map[string]struct {
		req  gateproto.GateAuthorizeHTTPRequest
		want string
	}{
		"viewer":      {gateproto.GateAuthorizeHTTPRequest{Host: host, SessionID: w.viewerSess, UserID: w.viewer.ID}, gateproto.VerdictForbidden},
		"no login":    {gateproto.GateAuthorizeHTTPRequest{Host: host}, gateproto.VerdictLogin},
		"not exposed": {gateproto.GateAuthorizeHTTPRequest{Host: strconv.Itoa(9999) + "-" + w.alloc, SessionID: w.memberSess, UserID: w.member.ID}, gateproto.VerdictNotFound},
	} {
		v, err := endpointtest.Read[gateproto.GateAuthorizeHTTPResponse](ctx, ask, w.gateway, tc.req)
		if err != nil || v.Verdict != tc.want || v.Auth != nil {
			t.Errorf("%s: %+v, %v; want %s", name, v, err, tc.want)
		}
	}
	if _, err := endpointtest.Read[gateproto.GateAuthorizeHTTPResponse](ctx, ask, w.gateway,
		gateproto.GateAuthorizeHTTPRequest{Host: "nope"}); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Errorf("bad host: %v; want invalid_argument", err)
	}
	if a := w.audits(t); len(a) != 0 {
		t.Fatalf("audit: %q; want none", a)
	}
}
