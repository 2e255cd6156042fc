package exposures_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/exposures"
	"github.com/gpuaas/gpuaas/controld/gate"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestLinkFollowsTheVerdict: expose.link mints a one-time link bound to
// the caller's login only where gate.authorize_http would let that login
// in (the gateway's verdict, as the server hands it in), and audits it:
// a member gets one for a project-shared exposure; a viewer is refused as
// forbidden, and once the allocation is released the exposure is
// not_found; the refusals write nothing.
func TestLinkFollowsTheVerdict(t *testing.T) {
	ctx := context.Background()
	s := serve(t)
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return s.now }
	ids, err := identity.New(identity.Config{SigningKey: key, Settings: identity.Settings{BcryptCost: 4}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	g := gate.Deps{DB: s.pool, IDs: ids, Log: testutil.Logger(t), Now: clock}
	defs := exposures.Endpoints(exposures.Deps{DB: s.pool, AppsURL: "https://*.apps.example.test", Now: clock,
		Allocation: func(ctx context.Context, q store.Batcher, p *identity.Principal, id string) (api.Allocation, error) {
			return alloc.Get(ctx, q, alloc.Actor{UserID: p.UserID, Role: p.Role}, id)
		},
		Verdict: g.HTTPVerdict, Audited: g.AuditedTx})
	link := endpointtest.Find(t, defs, api.EndpointExposeLink)
	as := func(user string) *endpoint.Request {
		const password = "correct horse battery staple"
		if err := ids.SetPassword(ctx, s.pool, user+"@example.test", password); err != nil {
			t.Fatal(err)
		}
		l, err := ids.Login(ctx, s.pool, user+"@example.test", password)
		if err != nil {
			t.Fatal(err)
		}
		return &endpoint.Request{Principal: &identity.Principal{UserID: user, SessionID: l.SessionID, Role: api.RoleUser}}
	}
	e, err := exposures.Create(ctx, s.pool, exposures.CreateArgs{ProjectID: s.project, AllocationID: s.alloc, Port: 8888,
		Share: api.ShareProject, TTL: time.Hour, ActorID: s.user}, s.now)
	if err != nil {
		t.Fatal(err)
	}
	member, viewer := as(s.member), as(s.viewer)
	before := s.written(t)
	req := api.ExposeLinkRequest{Host: e.Host, Path: "/lab"}
	if _, err := endpointtest.Read[api.ExposeLinkResponse](ctx, link, viewer, req); api.CodeOf(err) != api.CodeForbidden {
		t.Fatalf("a viewer's link: %v; want forbidden", err)
	}
	if n := s.written(t); n != before {
		t.Fatalf("rows after the viewer's refusal: %d; want %d", n, before)
	}
	got, err := endpointtest.Read[api.ExposeLinkResponse](ctx, link, member, req)
	if err != nil || got.Code == "" {
		t.Fatalf("a member's link: %+v, %v", got, err)
	}
	var action, session string
	if err := s.pool.QueryRow(ctx, `SELECT action, detail->>'session_id' FROM audit_logs WHERE target_id = $1`, e.ID).Scan(&action, &session); err != nil ||
		action != api.EndpointExposeLink || session != member.Principal.SessionID {
		t.Fatalf("the link's audit: %s %s, %v; want %s naming %s", action, session, err, api.EndpointExposeLink, member.Principal.SessionID)
	}

	if _, err := s.pool.Exec(ctx, `UPDATE allocations SET state = $2 WHERE id = $1`, s.alloc, api.AllocReleased); err != nil {
		t.Fatal(err)
	}
	before = s.written(t)
	if _, err := endpointtest.Read[api.ExposeLinkResponse](ctx, link, member, req); api.CodeOf(err) != api.CodeNotFound {
		t.Fatalf("a member's link once released: %v; want not_found", err)
	}
	if n := s.written(t); n != before {
		t.Fatalf("rows after the refusal: %d; want %d", n, before)
	}
}
