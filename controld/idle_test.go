package controld_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/idle"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/signing"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// startIdle is a funded controld on a settable clock whose idle evaluator
// runs only when the test ticks it: periods of at least a minute, warnings
// two minutes ahead.
func startIdle(t *testing.T) *billingEnv {
	t.Helper()
	// The real time to start with: a gateway's login assertion must be
	// within a minute of controld's clock (idleGateway logs in at once).
	clock := testutil.NewClock(time.Now().UTC().Truncate(time.Second))
	env := controldtest.Start(t, controldtest.Options{Now: clock.Now,
		Idle: controld.IdleConfig{MinPeriod: time.Minute, WarnAhead: 2 * time.Minute, Interval: time.Hour}})
	return &billingEnv{Env: env, clock: clock}
}

// idleGateway is a gateway client, logged in while the clock still reads
// the real time.
func idleGateway(t *testing.T, e *billingEnv) *api.Client {
	t.Helper()
	gw := e.GatewayClient(t, "gw-idle")
	if _, err := gateproto.GateSessions(t.Context(), gw, gateproto.GateSessionsRequest{}); err != nil {
		t.Fatal(err)
	}
	return gw
}

func (e *billingEnv) idleTick(t *testing.T) idle.TickResult {
	t.Helper()
	res, err := e.Server.IdleTick(t.Context())
	if err != nil || res.Skipped {
		t.Fatalf("idle tick: %+v, %v", res, err)
	}
	return res
}

// createActive creates an allocation with req's policy and makes it
// active now.
func (e *billingEnv) createActive(t *testing.T, c *api.Client, req api.AllocCreateRequest) api.Allocation {
	t.Helper()
	req.SKU, req.GPUs = "h200-slice", 1
	a, err := c.AllocCreate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	activateID(t, e, a.ID)
	got, err := c.AllocGet(t.Context(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	return *got
}

// notices subscribes to userID's alloc.notice events.
func notices(t *testing.T, e *billingEnv, userID, token string) <-chan *nats.Msg {
	t.Helper()
	ch := make(chan *nats.Msg, 64)
	nc := e.UserConn(t, userID, token)
	if _, err := nc.ChanSubscribe(api.UserEventSubject(userID, api.EventAllocNotice), ch); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return ch
}

func nextNotice(t *testing.T, ch <-chan *nats.Msg) api.AllocNotice {
	t.Helper()
	select {
	case m := <-ch:
		var ev api.Event
		var n api.AllocNotice
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(ev.Data, &n); err != nil {
			t.Fatal(err)
		}
		if ev.Subject != n.AllocationID {
			t.Errorf("notice event subject %q; want the allocation %q", ev.Subject, n.AllocationID)
		}
		return n
	case <-time.After(20 * time.Second):
		t.Fatal("no alloc.notice event")
	}
	return api.AllocNotice{}
}

// TestIdleAllocationIsWarnedOnceThenReleased: a project policy of 10m;
// an allocation nobody uses is warned once, 2m ahead, by an alloc.notice
// event with its deadline, and released at the deadline by system:idle
// with reason idle (alloc.get, the transition, the audit row).
func TestIdleAllocationIsWarnedOnceThenReleased(t *testing.T) {
	t.Parallel()
	e := startIdle(t)
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	evs := notices(t, e, e.Admin.ID, e.AdminToken)
	pol, err := c.ProjectSetPolicy(ctx, api.ProjectPolicyRequest{IdleReleaseAfter: "10m"})
	if err != nil || pol.IdleReleaseAfterSeconds != 600 {
		t.Fatalf("set policy: %+v, %v", pol, err)
	}
	start := e.clock.Now()
	a := e.createActive(t, c, api.AllocCreateRequest{})
	got, err := c.AllocGet(ctx, a.ID)
	if err != nil || got.Policy == nil || got.Policy.IdleFrom != "project" || got.Policy.IdleReleaseAt == nil ||
		!got.Policy.IdleReleaseAt.Equal(start.Add(10*time.Minute)) {
		t.Fatalf("alloc get policy %+v, %v; want the project's 10m, released at %v", got.Policy, err, start.Add(10*time.Minute))
	}
	e.clock.Advance(7*time.Minute + 59*time.Second)
	if res := e.idleTick(t); res.Warned != 0 || res.Released != 0 {
		t.Fatalf("tick before the warning: %+v; want nothing", res)
	}
	e.clock.Advance(time.Second)
	if res := e.idleTick(t); res.Warned != 1 {
		t.Fatalf("tick at the warning: %+v; want one warning", res)
	}
	n := nextNotice(t, evs)
	if n.AllocationID != a.ID || n.Kind != api.NoticeIdleWarning || n.Deadline == nil || !n.Deadline.Equal(start.Add(10*time.Minute)) || n.Message == "" {
		t.Fatalf("notice %+v; want an idle warning for %s with its deadline", n, a.ID)
	}
	e.clock.Advance(time.Minute)
	if res := e.idleTick(t); res.Warned != 0 || res.Released != 0 {
		t.Fatalf("tick after the warning: %+v; want nothing (warned once)", res)
	}
	e.clock.Advance(time.Minute)
	if res := e.idleTick(t); res.Released != 1 {
		t.Fatalf("tick at the deadline: %+v; want one release", res)
	}
	got, err = c.AllocGet(ctx, a.ID)
	if err != nil || got.State != api.AllocReleasing || got.Reason != api.ReasonIdle {
		t.Fatalf("after the deadline: %s (%q), %v; want releasing, reason idle", got.State, got.Reason, err)
	}
	var actor, action string
	if err := e.Server.Pool().QueryRow(ctx, `SELECT actor_id FROM allocation_transitions WHERE allocation_id = $1 AND to_state = 'releasing'`, a.ID).Scan(&actor); err != nil || actor != idle.SystemActor {
		t.Errorf("releasing transition by %q, %v; want %s", actor, err, idle.SystemActor)
	}
	if err := e.Server.Pool().QueryRow(ctx, `SELECT action FROM audit_logs WHERE target_id = $1 AND actor_id = $2`, a.ID, idle.SystemActor).Scan(&action); err != nil || action != "alloc.idle_release" {
		t.Errorf("audit row %q, %v; want alloc.idle_release", action, err)
	}
	if res := e.idleTick(t); res.Released != 0 || res.Warned != 0 {
		t.Errorf("tick after the release: %+v; want nothing", res)
	}
}

// TestIdleActivityCancelsWarning: gateway activity after a warning keeps
// the allocation past its deadline and re-arms the warning for the next
// idle stretch; GPU activity counts too; an allocation whose own policy
// is off is never touched under a project policy.
func TestIdleActivityCancelsWarning(t *testing.T) {
	t.Parallel()
	e := startIdle(t)
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	gw := idleGateway(t, e)
	if _, err := c.ProjectSetPolicy(ctx, api.ProjectPolicyRequest{IdleReleaseAfter: "1h"}); err != nil {
		t.Fatal(err)
	}
	a := e.createActive(t, c, api.AllocCreateRequest{IdleReleaseAfter: "10m"})
	off := e.createActive(t, c, api.AllocCreateRequest{IdleReleaseAfter: api.PolicyOff})
	e.clock.Advance(8 * time.Minute)
	if res := e.idleTick(t); res.Warned != 1 {
		t.Fatalf("tick at 8m: %+v; want one warning", res)
	}
	r, err := gateproto.GateActivity(ctx, gw, gateproto.GateActivityRequest{LastActive: map[string]time.Time{a.ID: e.clock.Now(), "a-nonexistent": e.clock.Now()}})
	if err != nil || r.Recorded != 1 {
		t.Fatalf("gate.activity: %+v, %v; want one recorded", r, err)
	}
	e.clock.Advance(2 * time.Minute)
	if res := e.idleTick(t); res.Released != 0 || res.Warned != 0 {
		t.Fatalf("tick at the old deadline after activity: %+v; want nothing", res)
	}
	e.clock.Advance(6 * time.Minute) // 8m since the activity: the new stretch's warning
	if res := e.idleTick(t); res.Warned != 1 {
		t.Fatalf("tick 8m after the activity: %+v; want a new warning", res)
	}
	// The GPU was busy: that counts as activity as well.
	if _, err := idle.RecordGPUActivity(ctx, e.Server.Pool(), a.NodeID,
		map[string]time.Time{a.Slots[0].GPUPCI: e.clock.Now()}, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Minute)
	if res := e.idleTick(t); res.Released != 0 {
		t.Fatalf("tick after GPU activity: %+v; want no release", res)
	}
	got, err := c.AllocGet(ctx, a.ID)
	if err != nil || got.State != api.AllocActive || got.Policy == nil || got.Policy.LastActiveAt == nil ||
		got.Policy.IdleFrom != "allocation" {
		t.Fatalf("alloc get %s %+v, %v; want active with its own policy and a last activity", got.State, got.Policy, err)
	}
	e.clock.Advance(8 * time.Minute)
	if res := e.idleTick(t); res.Released != 1 {
		t.Fatalf("tick 10m after the GPU activity: %+v; want a release", res)
	}
	if got, err := c.AllocGet(ctx, off.ID); err != nil || got.State != api.AllocActive || got.Policy != nil {
		t.Fatalf("allocation with idle release off: %s %+v, %v; want active, no policy", got.State, got.Policy, err)
	}
}

// TestMaxDurationReleasedWhateverActivity: --max-duration warns ahead
// and releases at active + max with reason max_duration, activity or not.
func TestMaxDurationReleasedWhateverActivity(t *testing.T) {
	t.Parallel()
	e := startIdle(t)
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	evs := notices(t, e, e.Admin.ID, e.AdminToken)
	start := e.clock.Now()
	a := e.createActive(t, c, api.AllocCreateRequest{MaxDuration: "30m"})
	// What gate.activity records (its gateway's session would expire on
	// this clock).
	busy := func() {
		if n, err := idle.RecordGateActivity(ctx, e.Server.Pool(), map[string]time.Time{a.ID: e.clock.Now()}, e.clock.Now()); err != nil || n != 1 {
			t.Fatalf("record activity: %d, %v", n, err)
		}
	}
	for range 27 {
		e.clock.Advance(time.Minute)
		busy()
		if res := e.idleTick(t); res.Warned != 0 || res.Released != 0 {
			t.Fatalf("tick at %v: %+v; want nothing", e.clock.Now().Sub(start), res)
		}
	}
	e.clock.Advance(time.Minute)
	busy()
	if res := e.idleTick(t); res.Warned != 1 {
		t.Fatalf("tick at 28m: %+v; want the max-duration warning", res)
	}
	if n := nextNotice(t, evs); n.Kind != api.NoticeMaxDuration || n.Deadline == nil || !n.Deadline.Equal(start.Add(30*time.Minute)) {
		t.Fatalf("notice %+v; want max_duration at %v", n, start.Add(30*time.Minute))
	}
	e.clock.Advance(2 * time.Minute)
	busy()
	if res := e.idleTick(t); res.Released != 1 {
		t.Fatalf("tick at 30m: %+v; want a release", res)
	}
	got, err := c.AllocGet(ctx, a.ID)
	if err != nil || got.Reason != api.ReasonMaxDuration || got.State != api.AllocReleasing {
		t.Fatalf("after max duration: %s (%q), %v; want releasing, reason max_duration", got.State, got.Reason, err)
	}
}

// TestIdlePolicyValidation: bad periods are invalid_argument and change
// nothing; only a project's owners set its policy.
func TestIdlePolicyValidation(t *testing.T) {
	t.Parallel()
	e := startIdle(t)
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	count := func(sql string) int {
		var n int
		if err := e.Server.Pool().QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	allocs, policies := count(`SELECT count(*) FROM allocations`), count(`SELECT count(*) FROM idle_project_policies`)
	for _, v := range []string{"", "banana", "30s", "-5m", "90s500ms", "10000h"} {
		if _, err := c.ProjectSetPolicy(ctx, api.ProjectPolicyRequest{IdleReleaseAfter: v}); !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("project set %q: %v; want invalid argument", v, err)
		}
	}
	for _, req := range []api.AllocCreateRequest{{IdleReleaseAfter: "30s"}, {IdleReleaseAfter: "soon"},
		{MaxDuration: api.PolicyOff}, {MaxDuration: "0"}, {MaxDuration: "1m", IdleReleaseAfter: "x"}} {
		req.SKU, req.GPUs = "h200-slice", 1
		if _, err := c.AllocCreate(ctx, req); !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("alloc create %+v: %v; want invalid argument", req, err)
		}
	}
	if _, err := c.AllocQuote(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1, MaxDuration: "soon"}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("alloc create --dry-run with a bad max duration: %v; want invalid argument", err)
	}
	if a, p := count(`SELECT count(*) FROM allocations`), count(`SELECT count(*) FROM idle_project_policies`); a != allocs || p != policies {
		t.Errorf("after refused requests: %d allocations, %d policies; want %d, %d", a, p, allocs, policies)
	}
	member, memberToken := e.AddUser(t, "member@example.test", api.RoleUser)
	if _, err := c.ProjectAddMember(ctx, api.AddMemberRequest{Email: member.Email, Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client(memberToken).ProjectSetPolicy(ctx, api.ProjectPolicyRequest{Project: controldtest.ProjectName, IdleReleaseAfter: "1h"}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("a member sets the policy: %v; want forbidden", err)
	}
	if p, err := c.ProjectSetPolicy(ctx, api.ProjectPolicyRequest{IdleReleaseAfter: api.PolicyOff}); err != nil || p.IdleReleaseAfterSeconds != 0 {
		t.Errorf("policy off: %+v, %v", p, err)
	}
}

// TestGateActivityRefusesNonGateway: only a gateway's service principal
// may report activity.
func TestGateActivityRefusesNonGateway(t *testing.T) {
	t.Parallel()
	e := startIdle(t)
	a := e.createActive(t, e.Client(e.AdminToken), api.AllocCreateRequest{IdleReleaseAfter: "10m"})
	_, err := gateproto.GateActivity(t.Context(), e.Client(e.AdminToken), gateproto.GateActivityRequest{LastActive: map[string]time.Time{a.ID: e.clock.Now()}})
	if !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("gate.activity as an admin: %v; want forbidden", err)
	}
	var n int
	if err := e.Server.Pool().QueryRow(t.Context(), `SELECT count(*) FROM idle_allocations WHERE gate_active_at IS NOT NULL`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("activity rows: %d, %v; want none", n, err)
	}
}

// activateID makes an allocation active the way a successful provisioning
// report does (alloc.ProvisionDone).
func activateID(t *testing.T, e *billingEnv, id string) {
	t.Helper()
	ctx := t.Context()
	err := pgx.BeginFunc(ctx, e.Server.Pool(), func(tx pgx.Tx) error {
		_, err := alloc.ProvisionDone(ctx, tx, id, hostproto.TaskSucceeded, "", e.clock.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReleasedAllocationKeepsWhyItWasReleased is the regression test of
// "an idle-released allocation says reason `released` once hostd finished
// the release": the released state keeps the releasing reason (idle).
func TestReleasedAllocationKeepsWhyItWasReleased(t *testing.T) {
	t.Parallel()
	e := startIdle(t)
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	a := e.createActive(t, c, api.AllocCreateRequest{IdleReleaseAfter: "10m"})
	e.clock.Advance(10 * time.Minute)
	if res := e.idleTick(t); res.Released != 1 {
		t.Fatalf("tick at the deadline: %+v; want one release", res)
	}
	err := pgx.BeginFunc(ctx, e.Server.Pool(), func(tx pgx.Tx) error {
		_, _, err := alloc.ReleaseDone(ctx, tx, a.ID, hostproto.TaskSucceeded, "", e.clock.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.AllocGet(ctx, a.ID)
	if err != nil || got.State != api.AllocReleased || got.Reason != api.ReasonIdle {
		t.Fatalf("after the node released it: %s (%q), %v; want released, reason idle", got.State, got.Reason, err)
	}
}

// TestIdleWarningEmailed: with billing's mail configured, an idle warning
// is also emailed to the project's members.
func TestIdleWarningEmailed(t *testing.T) {
	t.Parallel()
	sink := testutil.NewSMTPSink(t)
	clock := testutil.NewClock(time.Now().UTC().Truncate(time.Second))
	env := controldtest.Start(t, controldtest.Options{Now: clock.Now,
		Billing: controld.BillingConfig{SMTP: controld.SMTPConfig{Addr: sink.Addr(), From: "gpuaas@example.test"}},
		Idle:    controld.IdleConfig{MinPeriod: time.Minute, WarnAhead: 2 * time.Minute, Interval: time.Hour}})
	e := &billingEnv{Env: env, clock: clock}
	// A machine token of the project is told (an event) but takes no mail.
	if _, err := e.Client(e.AdminToken).TokenCreate(t.Context(), api.TokenCreateRequest{Name: "ci", Role: api.ProjectViewer,
		TTL: "1d"}); err != nil {
		t.Fatal(err)
	}
	a := e.createActive(t, e.Client(e.AdminToken), api.AllocCreateRequest{IdleReleaseAfter: "10m"})
	e.clock.Advance(8 * time.Minute)
	if res := e.idleTick(t); res.Warned != 1 {
		t.Fatalf("tick at 8m: %+v; want one warning", res)
	}
	msgs := sink.Messages()
	if len(msgs) != 1 || len(msgs[0].To) != 1 || msgs[0].To[0] != controldtest.AdminEmail ||
		!strings.Contains(msgs[0].Data, a.ID) || !strings.Contains(msgs[0].Data, "unless it is used") {
		t.Fatalf("emails %+v; want one warning about %s to %s", msgs, a.ID, controldtest.AdminEmail)
	}
}

// TestHeartbeatGPUActivityCountsForIdle: a node's signed heartbeat with
// GPUActive (hostd's GPU telemetry) moves the last activity of the
// allocation holding that GPU, and keeps it past its idle deadline.
func TestHeartbeatGPUActivityCountsForIdle(t *testing.T) {
	t.Parallel()
	e := startIdle(t)
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	a := e.createActive(t, c, api.AllocCreateRequest{IdleReleaseAfter: "10m"})
	// The seeded node gets a key of the test's, as enrollment would give
	// it one of hostd's.
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Server.Pool().Exec(ctx, `UPDATE nodes SET public_key = $2 WHERE id = $1`, a.NodeID, []byte(pub)); err != nil {
		t.Fatal(err)
	}
	// hostd's subjects are not a user's: controld's own identity here, its
	// replies on the node's inbox, where controld answers a node's reports.
	nc := e.Bus.Connect(t, nats.CustomInboxPrefix(api.InboxPrefix(a.NodeID)))
	e.clock.Advance(9 * time.Minute)
	busyAt := e.clock.Now()
	hb := hostproto.Heartbeat{NodeID: a.NodeID, At: busyAt, GPUActive: map[string]time.Time{a.Slots[0].GPUPCI: busyAt}}
	hb.ReportStamp = hostproto.ReportStamp{Kind: hostproto.HostHeartbeat, Seq: 1, SentAt: busyAt}
	env, err := signing.Seal(key, hb)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(env)
	reply, err := nc.Request(hostproto.MsgHeartbeat.SubjectOf(a.NodeID), body, 10*time.Second)
	if err != nil || !strings.Contains(string(reply.Data), `"ok":true`) {
		t.Fatalf("heartbeat: %v %s; want acknowledged", err, reply.Data)
	}
	got, err := c.AllocGet(ctx, a.ID)
	if err != nil || got.Policy == nil || got.Policy.LastActiveAt == nil || !got.Policy.LastActiveAt.Equal(busyAt) {
		t.Fatalf("policy after the heartbeat: %+v, %v; want last active %v", got.Policy, err, busyAt)
	}
	e.clock.Advance(2 * time.Minute) // past the deadline the activity moved
	if res := e.idleTick(t); res.Released != 0 {
		t.Fatalf("tick 11m after activation, 2m after GPU activity: %+v; want no release", res)
	}
}
