package exposures_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/exposures"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/controld/workloads"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// served is newFixture's project with exposures' endpoints over it, the
// lookups the server hands in, and users of each kind.
type served struct {
	*fixture
	endpointtest.Harness
	member, other, viewer, outsider string
}

func serve(t *testing.T) *served {
	t.Helper()
	f := newFixture(t)
	clock := func() time.Time { return f.now }
	s := &served{fixture: f, Harness: endpointtest.Serve(f.pool, clock,
		exposures.Endpoints(exposures.Deps{DB: f.pool, AppsURL: "https://*.apps.example.test", Now: clock,
			Allocation: func(ctx context.Context, q store.Batcher, p *identity.Principal, id string) (api.Allocation, error) {
				return alloc.Get(ctx, q, alloc.Actor{UserID: p.UserID, Role: p.Role}, id)
			},
			Workload: func(ctx context.Context, q store.Querier, p *identity.Principal, id string) (api.Workload, error) {
				return workloads.Get(ctx, q, alloc.Actor{UserID: p.UserID, Role: p.Role}, id)
			}})),
		member: ids.New(ids.User), other: ids.New(ids.User), viewer: ids.New(ids.User), outsider: ids.New(ids.User)}
	for id, role := range map[string]string{s.member: api.ProjectMember, s.other: api.ProjectMember, s.viewer: api.ProjectViewer, s.outsider: ""} {
		storetest.User(t, f.pool, id, id+"@example.test", f.now)
		if role != "" {
			storetest.Member(t, f.pool, f.project, id, role, f.now)
		}
	}
	return s
}

func (s *served) as(user string) *endpoint.Request {
	return endpointtest.User(user, s.project)
}

// written is every row an exposure endpoint may write.
func (s *served) written(t *testing.T) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM exposures) +
		(SELECT count(*) FROM audit_logs) + (SELECT count(*) FROM outbox_events)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestExposeEndpointsWhoMayEnd: a member exposes a port of an active
// allocation (its URL from AppsURL, its expiry from the injected clock);
// a viewer may list but not expose; another member may not end it
// (forbidden), an outsider does not see it (not_found), and those
// refusals write nothing; a project owner ends it by name.
func TestExposeEndpointsWhoMayEnd(t *testing.T) {
	ctx := context.Background()
	s := serve(t)
	create, list, remove := s.Find(t, api.EndpointExposeCreate), s.Find(t, api.EndpointExposeList),
		s.Find(t, api.EndpointExposeRemove)
	req := api.ExposeCreateRequest{Allocation: " " + s.alloc + " ", Port: 8888, Share: api.ShareProject, TTL: "2h", Name: "nb"}
	e, err := endpointtest.Mutate[api.Exposure](ctx, s.Run, create, s.as(s.member), req)
	if err != nil {
		t.Fatalf("member's expose: %v", err)
	}
	if e.URL != "https://8888-"+s.alloc+".apps.example.test" || !e.ExpiresAt.Equal(s.now.Add(2*time.Hour)) || e.CreatedBy != s.member {
		t.Fatalf("member's expose: %+v; want its URL under apps.example.test, expiring at %s", e, s.now.Add(2*time.Hour))
	}
	l, err := endpointtest.Read[api.ExposureList](ctx, list, s.as(s.viewer), api.ExposeListRequest{Allocation: s.alloc})
	if err != nil || len(l.Exposures) != 1 || l.Exposures[0].ID != e.ID || l.Exposures[0].URL != e.URL {
		t.Fatalf("viewer's list: %+v, %v; want %s with its URL", l, err, e.ID)
	}

	before := s.written(t)
	req.Port, req.Name = 9999, ""
	if _, err := endpointtest.Mutate[api.Exposure](ctx, s.Run, create, s.as(s.viewer), req); api.CodeOf(err) != api.CodeForbidden {
		t.Errorf("viewer's expose: err = %v; want forbidden", err)
	}
	if _, err := endpointtest.Mutate[api.Exposure](ctx, s.Run, remove, s.as(s.other), api.ExposeRemoveRequest{Exposure: e.ID}); api.CodeOf(err) != api.CodeForbidden {
		t.Errorf("another member's rm: err = %v; want forbidden", err)
	}
	if _, err := endpointtest.Mutate[api.Exposure](ctx, s.Run, remove, s.as(s.outsider), api.ExposeRemoveRequest{Exposure: e.ID}); api.CodeOf(err) != api.CodeNotFound {
		t.Errorf("outsider's rm: err = %v; want not_found", err)
	}
	if _, err := endpointtest.Read[api.ExposureList](ctx, list, s.as(s.outsider), api.ExposeListRequest{Allocation: s.alloc}); api.CodeOf(err) != api.CodeNotFound {
		t.Errorf("outsider's list: err = %v; want not_found", err)
	}
	if after := s.written(t); after != before {
		t.Fatalf("rows after the refusals: %d; want %d", after, before)
	}
	ended, err := endpointtest.Mutate[api.Exposure](ctx, s.Run, remove, s.as(s.user), api.ExposeRemoveRequest{Exposure: "nb"})
	if err != nil || ended.ID != e.ID || ended.RemovedAt == nil {
		t.Fatalf("owner's rm by name: %+v, %v", ended, err)
	}
}

// TestExposeCreateNeedsALiveTarget: a request without an allocation, with
// a bad port or TTL is invalid_argument; an allocation that is not active
// and a workload that does not exist are refused; no refusal writes a
// row.
func TestExposeCreateNeedsALiveTarget(t *testing.T) {
	ctx := context.Background()
	s := serve(t)
	create := s.Find(t, api.EndpointExposeCreate)
	pending := storetest.Allocation(t, s.pool, api.Allocation{ProjectID: s.project, UserID: s.user, SKU: "h100-baremetal",
		Shape: api.ShapeBaremetal, GPUs: 8, State: api.AllocProvisioning}).ID
	for name, tc := range map[string]struct {
		req  api.ExposeCreateRequest
		want api.Code
	}{
		"no allocation":    {api.ExposeCreateRequest{Port: 8888}, api.CodeInvalidArgument},
		"bad port":         {api.ExposeCreateRequest{Allocation: s.alloc, Port: 70000}, api.CodeInvalidArgument},
		"bad ttl":          {api.ExposeCreateRequest{Allocation: s.alloc, Port: 8888, TTL: "soon"}, api.CodeInvalidArgument},
		"not active":       {api.ExposeCreateRequest{Allocation: pending, Port: 8888}, api.CodeConflict},
		"no such workload": {api.ExposeCreateRequest{Allocation: ids.New(ids.Workload), Port: 8888}, api.CodeNotFound},
	} {
		if _, err := endpointtest.Mutate[api.Exposure](ctx, s.Run, create, s.as(s.user), tc.req); api.CodeOf(err) != tc.want {
			t.Errorf("%s: err = %v; want %s", name, err, tc.want)
		}
	}
	if n := s.written(t); n != 0 {
		t.Fatalf("%d rows after the refusals; want 0", n)
	}
}

// TestRedeemLinkEndpoint: the front redeems a link's code once, in a
// transaction of its own; a second redeem, another host's and a request
// without a code are refused.
func TestRedeemLinkEndpoint(t *testing.T) {
	ctx := context.Background()
	s := serve(t)
	e, err := s.create(t, 8888, "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	link, err := exposures.MintLink(ctx, s.pool, e, s.user, "sess-1", "/lab", s.now)
	if err != nil {
		t.Fatal(err)
	}
	redeem := s.Find(t, gateproto.EndpointGateRedeemLink)
	gw := endpointtest.As("gw", api.RoleGateway, "")
	if _, err := endpointtest.Read[gateproto.GateRedeemLinkResponse](ctx, redeem, gw, gateproto.GateRedeemLinkRequest{Host: e.Host}); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Fatalf("redeem without a code: err = %v; want invalid_argument", err)
	}
	if _, err := endpointtest.Read[gateproto.GateRedeemLinkResponse](ctx, redeem, gw, gateproto.GateRedeemLinkRequest{Host: "9999-" + s.alloc, Code: link.Code}); err == nil {
		t.Fatal("redeem at another port: no error")
	}
	got, err := endpointtest.Read[gateproto.GateRedeemLinkResponse](ctx, redeem, gw, gateproto.GateRedeemLinkRequest{Host: " " + e.Host + " ", Code: link.Code})
	if err != nil || got.UserID != s.user || got.SessionID != "sess-1" || got.Path != "/lab" {
		t.Fatalf("redeem: %+v, %v; want %s's sess-1 to /lab", got, err, s.user)
	}
	if _, err := endpointtest.Read[gateproto.GateRedeemLinkResponse](ctx, redeem, gw, gateproto.GateRedeemLinkRequest{Host: e.Host, Code: link.Code}); err == nil {
		t.Fatal("second redeem of the same code: no error")
	}
}
