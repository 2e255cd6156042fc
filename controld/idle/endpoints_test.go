package idle_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/idle"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/ids"
)

func (e *env) endpoints() endpointtest.Harness {
	return endpointtest.Serve(e.pool, e.clock.Now, idle.Endpoints(idle.Deps{DB: e.pool, Settings: e.settings, Now: e.clock.Now}))
}

func as(user string) *endpoint.Request {
	return endpointtest.User(user, "")
}

// TestSetPolicyEndpoint: project.policy refuses no period and one under
// the minimum (invalid_argument) and a caller who is not an owner
// (forbidden), writing nothing; an owner's period is stored with one
// audit row naming it and one event to every member; "off" removes it.
func TestSetPolicyEndpoint(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	member := ids.New(ids.User)
	storetest.User(t, e.pool, member, "member@example.test", t0)
	storetest.Member(t, e.pool, e.project.ID, member, api.ProjectMember, t0)
	h := e.endpoints()
	set := h.Find(t, api.EndpointProjectPolicy)
	policy := func(user, period string) error {
		_, err := endpointtest.Mutate[api.ProjectPolicy](ctx, h.Run, set, as(user),
			api.ProjectPolicyRequest{Project: "proj", IdleReleaseAfter: period})
		return err
	}
	for _, tc := range []struct {
		name, user, period string
		want               api.Code
	}{
		{"no period", e.user, "", api.CodeInvalidArgument},
		{"under the minimum", e.user, "30s", api.CodeInvalidArgument},
		{"not a duration", e.user, "soon", api.CodeInvalidArgument},
		{"a member", member, "2h", api.CodeForbidden},
	} {
		endpointtest.WantCode(t, tc.name, policy(tc.user, tc.period), tc.want)
	}
	if n := e.count(t, `SELECT count(*) FROM idle_project_policies`) + e.count(t, `SELECT count(*) FROM audit_logs`); n != 0 {
		t.Fatalf("policies and audit rows after refusals: got %d; want 0", n)
	}

	if err := policy(e.user, "2h"); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, `SELECT count(*) FROM idle_project_policies WHERE project_id = $1 AND idle_release_after_s = 7200`,
		e.project.ID); n != 1 {
		t.Errorf("policy rows of 2h: got %d; want 1", n)
	}
	if n := e.count(t, `SELECT count(*) FROM audit_logs WHERE action = $1 AND project_id = $2
		AND (detail->>'idle_release_after_seconds')::int = 7200`, api.EndpointProjectPolicy, e.project.ID); n != 1 {
		t.Errorf("audit rows naming the period: got %d; want 1", n)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND users @> ARRAY[$2, $3]::text[]`,
		api.EventProjectPolicy, e.user, member); n != 1 {
		t.Errorf("policy events to both members: got %d; want 1", n)
	}
	if err := policy(e.user, "off"); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, `SELECT count(*) FROM idle_project_policies`); n != 0 {
		t.Errorf("policies after off: got %d; want 0", n)
	}
}

// TestGateActivityEndpoint: a gateway's report over the bound is
// invalid_argument and records nothing; a report within it records the
// allocations it names, at the injected clock's reading at most.
func TestGateActivityEndpoint(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := e.active(t)
	activity := e.endpoints().Find(t, gateproto.EndpointGateActivity)
	gw := endpointtest.As("gw", api.RoleGateway, "")
	// One over the bound, the real allocation among them.
	big := map[string]time.Time{id: t0}
	for len(big) <= idle.MaxActivityReport {
		big[ids.New(ids.Allocation)] = t0
	}
	_, err := endpointtest.Read[gateproto.GateActivityResponse](ctx, activity, gw, gateproto.GateActivityRequest{LastActive: big})
	endpointtest.WantCode(t, "report over the bound", err, api.CodeInvalidArgument)
	if n := e.count(t, `SELECT count(*) FROM idle_allocations WHERE gate_active_at IS NOT NULL`); n != 0 {
		t.Fatalf("activity after a refused report: got %d rows; want 0", n)
	}
	e.clock.Set(t0.Add(time.Hour))
	resp, err := endpointtest.Read[gateproto.GateActivityResponse](ctx, activity, gw,
		gateproto.GateActivityRequest{LastActive: map[string]time.Time{id: t0.Add(30 * time.Minute)}})
	if err != nil || resp.Recorded != 1 {
		t.Fatalf("report of one allocation: got %+v, %v; want 1 recorded", resp, err)
	}
	if n := e.count(t, `SELECT count(*) FROM idle_allocations WHERE allocation_id = $1 AND gate_active_at IS NOT NULL`, id); n != 1 {
		t.Errorf("activity of %s: got %d rows; want 1", id, n)
	}
}
