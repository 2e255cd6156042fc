package secrets_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/secrets"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// in is a request of user's acting in project (the Gpuaas-Project header).
func in(user, project string) *endpoint.Request {
	return endpointtest.User(user, project)
}

func rows(t *testing.T, w *world) int {
	t.Helper()
	var n int
	if err := w.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM project_secrets) +
		(SELECT count(*) FROM audit_logs) + (SELECT count(*) FROM outbox_events)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSecretEndpointsByRole: an owner's set (project from the header)
// stores the secret at the injected clock's time, with one audit row and
// one event that carry no value; a viewer lists the names but its set and
// remove are forbidden with nothing written; someone outside the project
// cannot list it (not_found).
func TestSecretEndpointsByRole(t *testing.T) {
	ctx := context.Background()
	w, k := newWorld(t), newKey(t)
	viewer, outsider := ids.New(ids.User), ids.New(ids.User)
	storetest.User(t, w.pool, viewer, "viewer@example.test", t0)
	storetest.User(t, w.pool, outsider, "outsider@example.test", t0)
	storetest.Member(t, w.pool, w.p1.ID, viewer, api.ProjectViewer, t0)
	at := t0.Add(90 * time.Minute)
	clock := func() time.Time { return at }
	h := endpointtest.Serve(w.pool, clock, secrets.Endpoints(secrets.Deps{DB: w.pool, Key: k, Now: clock}))
	run := h.Run
	set, list, remove := h.Find(t, api.EndpointSecretSet), h.Find(t, api.EndpointSecretList), h.Find(t, api.EndpointSecretRemove)

	const value = "hf_the-value-nobody-reads-back"
	s, err := endpointtest.Mutate[api.Secret](ctx, run, set, in(w.bob, w.p1.Name), api.SecretSetRequest{Name: " hf-token ", Value: []byte(value)})
	if err != nil || s.Name != "hf-token" || s.ProjectID != w.p1.ID || !s.SetAt.Equal(at) {
		t.Fatalf("owner's set: %+v, %v; want hf-token in %s set at %s", s, err, w.p1.ID, at)
	}
	var dump string
	if err := w.pool.QueryRow(ctx, `SELECT (SELECT string_agg(detail::text, ' ') FROM audit_logs WHERE action = $1) ||
		(SELECT string_agg(payload::text, ' ') FROM outbox_events WHERE kind = $2)`, api.EndpointSecretSet, api.EventSecret).Scan(&dump); err != nil {
		t.Fatalf("audit row and event of the set: %v", err)
	}
	if strings.Contains(dump, value) || !strings.Contains(dump, "hf-token") {
		t.Fatalf("audit detail and event payload %s: want the name, never the value", dump)
	}

	got, err := endpointtest.Read[api.SecretList](ctx, list, in(viewer, w.p1.Name), api.SecretListRequest{})
	if err != nil || got.Project != w.p1.Name || len(got.Secrets) != 1 || got.Secrets[0].Name != "hf-token" {
		t.Fatalf("viewer's list: %+v, %v; want hf-token in %s", got, err, w.p1.Name)
	}
	if b, _ := json.Marshal(got); strings.Contains(string(b), value) {
		t.Fatalf("list shows the value: %s", b)
	}

	before := rows(t, w)
	if _, err := endpointtest.Mutate[api.Secret](ctx, run, set, in(viewer, w.p1.Name), api.SecretSetRequest{Name: "hf-token", Value: []byte("x")}); api.CodeOf(err) != api.CodeForbidden {
		t.Errorf("viewer's set: err = %v; want forbidden", err)
	}
	if _, err := endpointtest.Mutate[api.Secret](ctx, run, remove, in(viewer, w.p1.Name), api.SecretRemoveRequest{Name: "hf-token"}); api.CodeOf(err) != api.CodeForbidden {
		t.Errorf("viewer's remove: err = %v; want forbidden", err)
	}
	if after := rows(t, w); after != before {
		t.Errorf("rows after the viewer's refusals: %d; want %d", after, before)
	}
	if _, err := endpointtest.Read[api.SecretList](ctx, list, in(outsider, w.p1.Name), api.SecretListRequest{}); api.CodeOf(err) != api.CodeNotFound {
		t.Errorf("outsider's list: err = %v; want not_found", err)
	}
	if _, err := endpointtest.Mutate[api.Secret](ctx, run, remove, in(w.bob, ""), api.SecretRemoveRequest{Project: w.p1.Name, Name: "hf-token"}); err != nil {
		t.Fatalf("owner's remove naming the project: %v", err)
	}
	if got, err := endpointtest.Read[api.SecretList](ctx, list, in(w.bob, w.p1.Name), api.SecretListRequest{}); err != nil || got.Secrets == nil || len(got.Secrets) != 0 {
		t.Fatalf("list after remove: %+v, %v; want an empty list, not null", got, err)
	}
}

// TestSetEndpointRefusesBeforeTheProject: without a secrets key, and with
// a value over the limit, secret.set is refused before it looks the
// project up (even one the caller does not belong to), with nothing
// written; a bad name is invalid_argument.
func TestSetEndpointRefusesBeforeTheProject(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	stranger := ids.New(ids.User)
	storetest.User(t, w.pool, stranger, "stranger@example.test", t0)
	clock := func() time.Time { return t0 }
	run := &mutate.Runner{Pool: w.pool, Now: clock}
	noKey := endpointtest.Find(t, secrets.Endpoints(secrets.Deps{DB: w.pool, Now: clock}), api.EndpointSecretSet)
	_, err := endpointtest.Mutate[api.Secret](ctx, run, noKey, in(stranger, w.p1.Name), api.SecretSetRequest{Name: "tok", Value: []byte("x")})
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeUnavailable || !strings.Contains(e.Hint, "--secrets-key-file") {
		t.Fatalf("set without a key: err = %v; want unavailable naming --secrets-key-file", err)
	}
	keyed := endpointtest.Find(t, secrets.Endpoints(secrets.Deps{DB: w.pool, Key: newKey(t), Now: clock}), api.EndpointSecretSet)
	for name, req := range map[string]api.SecretSetRequest{
		"too big":  {Name: "tok", Value: make([]byte, api.MaxSecretBytes+1)},
		"bad name": {Name: "no spaces allowed", Value: []byte("x")},
	} {
		if _, err := endpointtest.Mutate[api.Secret](ctx, run, keyed, in(stranger, w.p1.Name), req); api.CodeOf(err) != api.CodeInvalidArgument {
			t.Errorf("%s: err = %v; want invalid_argument", name, err)
		}
	}
	if n := rows(t, w); n != 0 {
		t.Fatalf("%d rows after the refusals; want 0", n)
	}
}
