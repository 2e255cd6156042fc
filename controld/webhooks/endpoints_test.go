package webhooks

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// served is a project with an owner, a member and an outsider, and
// webhooks' endpoints over its database under production's Policy.
type served struct {
	pool                    *pgxpool.Pool
	project                 string
	owner, member, outsider string
	endpointtest.Harness
}

func serve(t *testing.T) *served {
	t.Helper()
	pool, owner, project := newProject(t)
	s := &served{pool: pool, project: project, owner: owner, member: ids.New(ids.User), outsider: ids.New(ids.User)}
	storetest.Member(t, pool, project, owner, api.ProjectOwner, t0)
	storetest.User(t, pool, s.member, "member@example.test", t0)
	storetest.Member(t, pool, project, s.member, api.ProjectMember, t0)
	storetest.User(t, pool, s.outsider, "outsider@example.test", t0)
	clock := func() time.Time { return t0 }
	s.Harness = endpointtest.Serve(pool, clock, Endpoints(Deps{DB: pool, Now: clock}))
	return s
}

func (s *served) as(user string) *endpoint.Request {
	return endpointtest.User(user, s.project)
}

func (s *served) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return storetest.Count(t, s.pool, sql, args...)
}

// written is every row a webhook endpoint may write.
func (s *served) written(t *testing.T) int {
	return s.count(t, `SELECT (SELECT count(*) FROM webhooks) + (SELECT count(*) FROM webhook_deliveries) +
		(SELECT count(*) FROM audit_logs) + (SELECT count(*) FROM outbox_events)`)
}

// TestWebhookEndpointsNeedTheProjectsAdmin: the owner adds a webhook (its
// secret in the reply only, never in the audit row or the event); a URL
// the policy refuses and an unknown event are invalid_argument; a member
// lists webhooks but cannot add, test or remove one (forbidden), an
// outsider does not see it (not_found), and no refusal writes a row.
func TestWebhookEndpointsNeedTheProjectsAdmin(t *testing.T) {
	ctx := context.Background()
	s := serve(t)
	add, list := s.Find(t, api.EndpointWebhookAdd), s.Find(t, api.EndpointWebhookList)
	test, remove := s.Find(t, api.EndpointWebhookTest), s.Find(t, api.EndpointWebhookRemove)
	req := api.WebhookAddRequest{URL: " https://hooks.example.com/gpuaas ", Events: []string{api.EventAllocState}}
	w, err := endpointtest.Mutate[api.Webhook](ctx, s.Run, add, s.as(s.owner), req)
	if err != nil || w.Secret == "" || w.URL != "https://hooks.example.com/gpuaas" || w.ProjectID != s.project {
		t.Fatalf("owner's add: %+v, %v", w, err)
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs WHERE action = $1 AND target_id = $2`, api.EndpointWebhookAdd, w.ID); n != 1 {
		t.Fatalf("%d audit rows of the add; want 1", n)
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs a, outbox_events e WHERE strpos(a.detail::text, $1) > 0
		OR strpos(e.payload::text, $1) > 0`, w.Secret); n != 0 {
		t.Fatalf("the webhook's secret is in the audit row or the event")
	}

	before := s.written(t)
	for name, bad := range map[string]api.WebhookAddRequest{
		"http":          {URL: "http://hooks.example.com/gpuaas", Events: req.Events},
		"private":       {URL: "https://10.0.0.1/gpuaas", Events: req.Events},
		"unknown event": {URL: req.URL, Events: []string{"no.such.event"}},
	} {
		if _, err := endpointtest.Mutate[api.Webhook](ctx, s.Run, add, s.as(s.owner), bad); api.CodeOf(err) != api.CodeInvalidArgument {
			t.Errorf("add %s: err = %v; want invalid_argument", name, err)
		}
	}
	l, err := endpointtest.Read[api.WebhookList](ctx, list, s.as(s.member), api.WebhookListRequest{})
	if err != nil || len(l.Webhooks) != 1 || l.Webhooks[0].ID != w.ID || l.Webhooks[0].Secret != "" {
		t.Fatalf("member's list: %+v, %v; want %s without its secret", l, err, w.ID)
	}
	if _, err := endpointtest.Mutate[api.Webhook](ctx, s.Run, add, s.as(s.member), req); api.CodeOf(err) != api.CodeForbidden {
		t.Errorf("member's add: err = %v; want forbidden", err)
	}
	for _, d := range []endpoint.Def{test, remove} {
		if _, err := endpointtest.Mutate[struct{}](ctx, s.Run, d, s.as(s.member), api.WebhookRef{ID: w.ID}); api.CodeOf(err) != api.CodeForbidden {
			t.Errorf("member's %s: err = %v; want forbidden", d.Spec().Name, err)
		}
		if _, err := endpointtest.Mutate[struct{}](ctx, s.Run, d, s.as(s.outsider), api.WebhookRef{ID: w.ID}); api.CodeOf(err) != api.CodeNotFound {
			t.Errorf("outsider's %s: err = %v; want not_found", d.Spec().Name, err)
		}
		if _, err := endpointtest.Mutate[struct{}](ctx, s.Run, d, s.as(s.owner), api.WebhookRef{ID: " "}); api.CodeOf(err) != api.CodeInvalidArgument {
			t.Errorf("%s without an id: err = %v; want invalid_argument", d.Spec().Name, err)
		}
	}
	if after := s.written(t); after != before {
		t.Fatalf("rows after the refusals: %d; want %d", after, before)
	}
}

// TestDeliveryEndpoints: the owner's test queues a delivery told to the
// project's members; only a dead delivery is retried, by the project's
// admin (a member is forbidden, an empty id invalid_argument); the
// deliveries of a webhook are listed to members and not_found to an
// outsider, whose project header does not matter.
func TestDeliveryEndpoints(t *testing.T) {
	ctx := context.Background()
	s := serve(t)
	w, err := endpointtest.Mutate[api.Webhook](ctx, s.Run, s.Find(t, api.EndpointWebhookAdd), s.as(s.owner),
		api.WebhookAddRequest{URL: "https://hooks.example.com/x", Events: []string{api.EventAllocState}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := endpointtest.Mutate[api.WebhookDelivery](ctx, s.Run, s.Find(t, api.EndpointWebhookTest), s.as(s.owner), api.WebhookRef{ID: w.ID})
	if err != nil || d.WebhookID != w.ID || d.EventKind != api.WebhookTestKind {
		t.Fatalf("owner's test: %+v, %v", d, err)
	}
	if n := s.count(t, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND subject = $2 AND users @> ARRAY[$3, $4]::text[]`,
		api.EventWebhookDelivery, w.ID, s.owner, s.member); n != 1 {
		t.Fatalf("%d delivery events told to owner and member; want 1", n)
	}
	retry := s.Find(t, api.EndpointWebhookRetry)
	if _, err := endpointtest.Mutate[api.WebhookDelivery](ctx, s.Run, retry, s.as(s.owner), api.WebhookDeliveryRef{ID: d.ID}); api.CodeOf(err) != api.CodeConflict {
		t.Fatalf("retry of a pending delivery: err = %v; want conflict", err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE webhook_deliveries SET state = 'dead', attempts = 12 WHERE id = $1`, d.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := endpointtest.Mutate[api.WebhookDelivery](ctx, s.Run, retry, s.as(s.member), api.WebhookDeliveryRef{ID: d.ID}); api.CodeOf(err) != api.CodeForbidden {
		t.Fatalf("member's retry: err = %v; want forbidden", err)
	}
	if _, err := endpointtest.Mutate[api.WebhookDelivery](ctx, s.Run, retry, s.as(s.owner), api.WebhookDeliveryRef{ID: ""}); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Fatalf("retry without an id: err = %v; want invalid_argument", err)
	}
	if s.count(t, `SELECT count(*) FROM webhook_deliveries WHERE state = 'dead'`) != 1 {
		t.Fatal("a refused retry changed the delivery")
	}
	got, err := endpointtest.Mutate[api.WebhookDelivery](ctx, s.Run, retry, s.as(s.owner), api.WebhookDeliveryRef{ID: d.ID})
	if err != nil || got.State != api.DeliveryPending || got.Attempts != 0 {
		t.Fatalf("owner's retry: %+v, %v; want pending, 0 attempts", got, err)
	}
	deliveries := s.Find(t, api.EndpointWebhookDeliveries)
	l, err := endpointtest.Read[api.WebhookDeliveryList](ctx, deliveries, s.as(s.member), api.WebhookDeliveriesRequest{Webhook: w.ID})
	if err != nil || len(l.Deliveries) != 1 || l.Deliveries[0].ID != d.ID {
		t.Fatalf("member's deliveries: %+v, %v", l, err)
	}
	outsider := s.as(s.outsider)
	outsider.Project = ""
	if _, err := endpointtest.Read[api.WebhookDeliveryList](ctx, deliveries, outsider, api.WebhookDeliveriesRequest{Webhook: w.ID}); api.CodeOf(err) != api.CodeNotFound {
		t.Fatalf("outsider's deliveries of the webhook: err = %v; want not_found", err)
	}
}
