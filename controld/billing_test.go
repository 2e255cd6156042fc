package controld_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// billingEnv is a controld on a settable clock with a funded project.
type billingEnv struct {
	*controldtest.Env
	clock *testutil.Clock
}

func startBilling(t *testing.T, cfg controld.BillingConfig) *billingEnv {
	t.Helper()
	clock := testutil.NewClock(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	env := controldtest.Start(t, controldtest.Options{Now: clock.Now, Billing: cfg, Unfunded: true})
	return &billingEnv{Env: env, clock: clock}
}

// credit books an operator credit directly (the payments endpoints are
// another package's).
func (e *billingEnv) credit(t *testing.T, amount int64) {
	t.Helper()
	ctx := t.Context()
	err := pgx.BeginFunc(ctx, e.Server.Pool(), func(tx pgx.Tx) error {
		_, _, err := billing.Append(ctx, tx, billing.Entry{ProjectID: e.Project.ID, Kind: billing.KindAdjustment,
			Reference: fmt.Sprintf("test-credit-%d", e.clock.Now().UnixNano()), AmountMinor: amount,
			ActorID: e.Admin.ID, CreatedAt: e.clock.Now()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// activate creates an allocation through the API and makes it active the
// way a successful provisioning report does (alloc.ProvisionDone).
func (e *billingEnv) activate(t *testing.T, c *api.Client, sku string, gpus int) api.Allocation {
	t.Helper()
	ctx := t.Context()
	a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: sku, GPUs: gpus})
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, e.Server.Pool(), func(tx pgx.Tx) error {
		_, err := alloc.ProvisionDone(ctx, tx, a.ID, hostproto.TaskSucceeded, "", e.clock.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return *a
}

func (e *billingEnv) tick(t *testing.T) billing.TickResult {
	t.Helper()
	res, err := e.Server.BillingTick(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestControldActsAsTheAppRole(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	var role string
	if err := env.Server.Pool().QueryRow(ctx, `SELECT current_user`).Scan(&role); err != nil || role != "gpuaas_app" {
		t.Fatalf("controld's pool acts as %q (%v); want gpuaas_app", role, err)
	}
	for _, stmt := range []string{`UPDATE ledger_entries SET memo = ''`, `DELETE FROM ledger_entries`, `TRUNCATE ledger_entries`} {
		if _, err := env.Server.Pool().Exec(ctx, stmt); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s through controld's pool: %v; want permission denied", stmt, err)
		}
	}
}

// TestReleaseReportsCost: billing stops at the release request, the final
// partial window is charged then, and the release response, alloc.get,
// billing.usage, billing.balance and billing.ledger agree on the cost.
func TestReleaseReportsCost(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute})
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	e.credit(t, 100_00)
	e.clock.Advance(13 * time.Second) // mid-window
	a := e.activate(t, c, "h200-slice", 2)
	e.clock.Advance(10*time.Minute + 30*time.Second)
	if res := e.tick(t); res.Accrual.Windows != 1 {
		t.Fatalf("tick charged %+v; want one window", res.Accrual)
	}
	e.clock.Advance(17 * time.Second)
	rel, err := c.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID})
	if err != nil {
		t.Fatal(err)
	}
	seconds := int64(10*60 + 30 + 17)
	want := int64(350) * 2 * seconds / 3600
	if rel.Usage == nil || rel.Usage.Seconds != seconds || rel.Usage.AmountMinor != want || rel.Usage.StoppedAt == nil {
		t.Fatalf("release usage %+v; want %d s costing %d", rel.Usage, seconds, want)
	}
	// Nothing more accrues once the release was asked for, even while
	// hostd is still releasing.
	e.clock.Advance(5 * time.Minute)
	e.tick(t)
	got, err := c.AllocGet(ctx, a.ID)
	if err != nil || got.Usage == nil || got.Usage.AmountMinor != want {
		t.Fatalf("alloc.get usage %+v, %v; want %d", got.Usage, err, want)
	}
	u, err := c.BillingUsage(ctx, api.BillingUsageRequest{Allocation: a.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Usage) != 1 || u.TotalMinor != want || len(u.Usage[0].Windows) != 2 {
		t.Fatalf("billing.usage %+v; want 2 windows totalling %d", u, want)
	}
	bal, err := c.BillingBalance(ctx, api.BillingRequest{})
	if err != nil || bal.BalanceMinor != 100_00-want || bal.RunningAllocations != 0 || bal.ProjectID != e.Project.ID {
		t.Fatalf("balance %+v, %v; want %d with nothing running", bal, err, 100_00-want)
	}
	l, err := c.BillingLedger(ctx, api.BillingLedgerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, en := range l.Entries {
		sum += en.AmountMinor
	}
	if len(l.Entries) != 3 || sum != bal.BalanceMinor || l.Entries[2].Kind != api.LedgerAdjustment {
		t.Fatalf("ledger %+v; want the credit and two usage entries adding up to %d", l.Entries, bal.BalanceMinor)
	}
	// Reads check the project.
	_, strangerToken := e.AddUser(t, "stranger@example.test", api.RoleUser)
	stranger := e.Client(strangerToken)
	if _, err := stranger.BillingBalance(ctx, api.BillingRequest{}); !errors.Is(err, api.ErrNotFound) && !errors.Is(err, api.ErrForbidden) {
		t.Errorf("stranger's balance read: %v; want not found or forbidden", err)
	}
	if _, err := stranger.BillingUsage(ctx, api.BillingUsageRequest{Allocation: a.ID}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("stranger's usage read: %v; want not found", err)
	}
	if _, err := c.BillingLedger(ctx, api.BillingLedgerRequest{Limit: 5000}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("ledger with limit 5000: %v; want invalid argument", err)
	}
	if _, err := stranger.LedgerVerify(ctx); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("ledger verify as a user: %v; want forbidden", err)
	}
	v, err := c.LedgerVerify(ctx)
	if err != nil || !v.OK || len(v.Accounts) != 1 || v.Accounts[0].BalanceMinor != bal.BalanceMinor {
		t.Fatalf("ledger verify %+v, %v", v, err)
	}
}

// TestDepletedProjectIsReleased is acceptance 4 end to end: exactly one
// low-balance event, nothing released while the balance is positive, and
// after the grace period every allocation of the project is released
// through the state machine with events to the project's members on
// their own subjects.
func TestDepletedProjectIsReleased(t *testing.T) {
	t.Parallel()
	grace := 3 * time.Minute
	e := startBilling(t, controld.BillingConfig{Window: time.Minute, Grace: grace, LowBalanceThresholdMinor: 200})
	ctx := t.Context()
	admin := e.Client(e.AdminToken)
	member, memberToken := e.AddUser(t, "member@example.test", api.RoleUser)
	if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Email: member.Email, Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}
	// The member listens on their own event subjects, as `gpuaas watch` does.
	evs := make(chan *nats.Msg, 64)
	memberNC := e.UserConn(t, member.ID, memberToken)
	if _, err := memberNC.ChanSubscribe(api.UserEventWildcard(member.ID), evs); err != nil {
		t.Fatal(err)
	}
	if err := memberNC.Flush(); err != nil {
		t.Fatal(err)
	}
	e.credit(t, 400)
	// 4 × 350 = 1400/h: 400 lasts a little over 17 minutes.
	a1 := e.activate(t, e.Client(memberToken), "h200-slice", 4)
	a2 := e.activate(t, admin, "h200-slice", 1)
	var depletedAt time.Time
	for i := 0; i < 40; i++ {
		e.clock.Advance(time.Minute)
		res := e.tick(t)
		bal, err := admin.BillingBalance(ctx, api.BillingRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Depleted > 0 {
			depletedAt = e.clock.Now()
		}
		got, err := admin.AllocGet(ctx, a1.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != api.AllocActive {
			if bal.BalanceMinor > 0 || depletedAt.IsZero() || e.clock.Now().Sub(depletedAt) < grace {
				t.Fatalf("allocation %s at %v with balance %d (depleted at %v)", got.State, e.clock.Now(), bal.BalanceMinor, depletedAt)
			}
			if res.Released != 2 {
				t.Errorf("tick released %d; want both allocations", res.Released)
			}
			break
		}
	}
	for _, id := range []string{a1.ID, a2.ID} {
		got, err := admin.AllocGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != api.AllocReleasing || !strings.Contains(got.Reason, "balance ran out") {
			t.Errorf("allocation %s is %s (%q); want releasing because the balance ran out", id, got.State, got.Reason)
		}
	}
	// Events reach the member: one warning, one depletion, and their
	// allocation's release.
	counts := map[string]int{}
	deadline := time.After(20 * time.Second)
	for counts[api.EventBillingLowBalance] < 1 || counts[api.EventBillingDepleted] < 1 || counts["releasing:"+a1.ID] < 1 {
		select {
		case m := <-evs:
			var ev api.Event
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				t.Fatal(err)
			}
			counts[ev.Kind]++
			if ev.Kind == api.EventAllocState {
				var sc api.AllocStateChange
				if err := json.Unmarshal(ev.Data, &sc); err != nil {
					t.Fatal(err)
				}
				counts[sc.To+":"+sc.Allocation.ID]++
			}
		case <-deadline:
			t.Fatalf("events so far %v; want a low-balance, a depleted and a releasing event", counts)
		}
	}
	var lowRows, auditRows int
	pool := e.Server.Pool()
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND project_id = $2`,
		api.EventBillingLowBalance, e.Project.ID).Scan(&lowRows); err != nil || lowRows != 1 {
		t.Errorf("%d low-balance events (%v); want exactly 1", lowRows, err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_logs WHERE action = 'billing.depleted_release'
		AND actor_id = $1`, billing.SystemActor).Scan(&auditRows); err != nil || auditRows != 2 {
		t.Errorf("%d audited depletion releases (%v); want 2", auditRows, err)
	}
	// Further ticks release nothing more, and the ledger is sound.
	e.clock.Advance(time.Minute)
	if res := e.tick(t); res.Released != 0 || res.LowBalance != 0 {
		t.Errorf("tick after the release: %+v", res)
	}
	if v, err := admin.LedgerVerify(ctx); err != nil || !v.OK {
		t.Errorf("ledger verify %+v, %v", v, err)
	}
}

// TestTopUpDuringGraceKeepsAllocations: a depleted project that is
// topped up before the grace period ends keeps its allocations.
func TestTopUpDuringGraceKeepsAllocations(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute, Grace: 5 * time.Minute})
	ctx := t.Context()
	admin := e.Client(e.AdminToken)
	// 2800/h: credited for the 10 minutes a create needs, then debited to
	// zero, depleted at once.
	e.credit(t, 467)
	a := e.activate(t, admin, "h200-slice", 8)
	e.clock.Advance(time.Millisecond) // credit references are made of the clock
	e.credit(t, -467)
	e.clock.Advance(time.Minute)
	if res := e.tick(t); res.Depleted != 1 {
		t.Fatalf("tick %+v; want the project depleted", res)
	}
	e.clock.Advance(2 * time.Minute)
	e.tick(t)
	e.credit(t, 100_00)
	for range 10 {
		e.clock.Advance(time.Minute)
		if res := e.tick(t); res.Released != 0 {
			t.Fatalf("released %d after the top-up", res.Released)
		}
	}
	got, err := admin.AllocGet(ctx, a.ID)
	if err != nil || got.State != api.AllocActive {
		t.Fatalf("allocation %+v, %v; want active", got, err)
	}
	bal, err := admin.BillingBalance(ctx, api.BillingRequest{})
	if err != nil || bal.DepletedAt != nil || bal.BurnRateMinorPerHour != 2800 {
		t.Fatalf("balance %+v, %v; want not depleted, burning 2800/h", bal, err)
	}
}

// TestBillingConfigChecks covers controld's billing settings.
func TestBillingConfigChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  controld.BillingConfig
		ok   bool
	}{
		{"defaults", controld.BillingConfig{}, true},
		{"sub-second window", controld.BillingConfig{Window: time.Millisecond}, false},
		{"negative grace", controld.BillingConfig{Grace: -time.Second}, false},
		{"negative threshold", controld.BillingConfig{LowBalanceThresholdMinor: -1}, false},
		{"negative minimum runway", controld.BillingConfig{MinRunway: -time.Minute}, false},
		{"smtp without from", controld.BillingConfig{SMTP: controld.SMTPConfig{Addr: "127.0.0.1:25"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.CheckAndSetDefaults()
			if (err == nil) != tc.ok {
				t.Fatalf("got %v; want ok=%v", err, tc.ok)
			}
			if tc.ok && (tc.cfg.Window != billing.DefaultWindow || tc.cfg.Grace != billing.DefaultGrace ||
				tc.cfg.MinRunway != billing.DefaultMinRunway) {
				t.Errorf("defaults not filled: %+v", tc.cfg)
			}
		})
	}
}

// TestSeedCreditsOnce: the initial credit of a seed is booked and audited
// once, however often the seed is applied.
func TestSeedCreditsOnce(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, Unfunded: true})
	ctx := t.Context()
	for range 2 {
		if _, err := env.Server.ApplySeed(ctx, controld.Seed{AdminEmail: controldtest.AdminEmail,
			Project: controldtest.ProjectName, InitialCreditMinor: 100_00}); err != nil {
			t.Fatal(err)
		}
	}
	bal, err := env.Client(env.AdminToken).BillingBalance(ctx, api.BillingRequest{})
	if err != nil || bal.BalanceMinor != 100_00 {
		t.Fatalf("balance %+v, %v; want 10000", bal, err)
	}
	var n int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_logs WHERE action = 'billing.credit'
		AND target_id = $1`, env.Project.ID).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d credit audit rows (%v); want 1", n, err)
	}
}
