package billing_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

type event struct {
	Kind  string
	Users []string
	Data  json.RawMessage
}

func events(t testing.TB, f *fixture, project string) []event {
	t.Helper()
	rows, err := f.app.Query(context.Background(), `SELECT kind, users, payload FROM outbox_events
		WHERE project_id = $1 AND kind LIKE 'billing.%' ORDER BY id`, project)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (event, error) {
		var e event
		return e, r.Scan(&e.Kind, &e.Users, &e.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestLowBalanceAndDepletion is acceptance 4 at the billing level: a
// project whose balance runs down gets exactly one low-balance warning
// (event and email), then a depleted event, and only once the grace
// period is over is its release asked for; never while the balance is
// positive. A top-up re-arms everything.
func TestLowBalanceAndDepletion(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p, bystander := f.project(t), f.project(t)
	start := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	clock := testutil.NewClock(start)
	appendEntry(t, f.app, credit(p, 500, start))
	appendEntry(t, f.app, credit(bystander, 1_000_000, start))
	// 8 × 220 = 1760/h: 500 lasts a little over 17 minutes.
	a := f.activeAllocation(t, p, "h100-baremetal", 8, start)
	f.activeAllocation(t, bystander, "h100-baremetal", 8, start)
	sink := testutil.NewSMTPSink(t)
	var mu sync.Mutex
	released := map[string]int{}
	grace := 5 * time.Minute
	r, err := billing.NewRunner(billing.Config{Settings: billing.Settings{Window: time.Minute, Grace: grace,
		LowBalanceThresholdMinor: 300}, Pool: f.app, Now: clock.Now, Log: testutil.Logger(t),
		Mailer: &billing.SMTPMailer{Addr: sink.Addr(), From: "billing@gpuaas.test"},
		Release: func(ctx context.Context, project string) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			released[project]++
			if released[project] > 1 {
				return 0, nil
			}
			return 1, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	var depletedAt time.Time
	for range 40 {
		clock.Advance(time.Minute)
		res, err := r.Tick(ctx)
		if err != nil {
			t.Fatal(err)
		}
		bal, err := billing.Balance(ctx, f.app, p)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		n := released[p]
		mu.Unlock()
		if bal > 0 && n > 0 {
			t.Fatalf("release asked for at %v with a balance of %d", clock.Now(), bal)
		}
		if res.Depleted > 0 {
			depletedAt = clock.Now()
		}
		if n > 0 && (depletedAt.IsZero() || clock.Now().Sub(depletedAt) < grace) {
			t.Fatalf("release asked for at %v, depleted at %v: before the grace period ended", clock.Now(), depletedAt)
		}
	}
	mu.Lock()
	if released[p] == 0 || released[bystander] != 0 {
		t.Errorf("releases asked for %v; want the depleted project only", released)
	}
	mu.Unlock()
	// One warning, one depletion, told to the project's member.
	evs := events(t, f, p)
	if len(evs) != 2 || evs[0].Kind != api.EventBillingLowBalance || evs[1].Kind != api.EventBillingDepleted {
		t.Fatalf("events %+v; want one low-balance then one depleted", evs)
	}
	for _, e := range evs {
		if len(e.Users) != 1 || e.Users[0] != f.userID {
			t.Errorf("%s told %v; want [%s]", e.Kind, e.Users, f.userID)
		}
	}
	var low api.BillingLowBalance
	if err := json.Unmarshal(evs[0].Data, &low); err != nil || low.ThresholdMinor != 300 || low.BalanceMinor >= 300 {
		t.Errorf("low-balance payload %+v, %v", low, err)
	}
	var dep api.BillingDepleted
	if err := json.Unmarshal(evs[1].Data, &dep); err != nil || !dep.GraceEndsAt.Equal(depletedAt.Add(grace)) || dep.BalanceMinor > 0 {
		t.Errorf("depleted payload %+v, %v; want grace ending %v", dep, err, depletedAt.Add(grace))
	}
	if evs := events(t, f, bystander); len(evs) != 0 {
		t.Errorf("funded project got events %+v", evs)
	}
	msgs := sink.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d emails; want 2", len(msgs))
	}
	for i, want := range []string{"low on credit", "run out of credit"} {
		if len(msgs[i].To) != 1 || msgs[i].To[0] != f.userID+"@example.test" || !strings.Contains(msgs[i].Data, want) {
			t.Errorf("email %d: to %v, %q; want to the member, about %q", i, msgs[i].To, msgs[i].Data, want)
		}
	}

	// Stop the meter as a release would, then top up: the account is back
	// to normal and the next crossing warns again.
	stop(t, f.app, a, clock.Now())
	appendEntry(t, f.app, credit(p, 10_000, clock.Now()))
	mu.Lock()
	before := released[p]
	mu.Unlock()
	clock.Advance(time.Minute)
	if _, err := r.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	var warned bool
	var depleted *time.Time
	if err := f.app.QueryRow(ctx, `SELECT low_balance_warned, depleted_at FROM billing_accounts WHERE project_id=$1`, p).
		Scan(&warned, &depleted); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	after := released[p]
	mu.Unlock()
	if warned || depleted != nil || after != before {
		t.Errorf("after the top-up: warned=%v depleted=%v releases %d→%d; want a normal account", warned, depleted, before, after)
	}
	bal, err := billing.Balance(ctx, f.app, p)
	if err != nil || bal < 400 {
		t.Fatalf("balance after the top-up %d, %v", bal, err)
	}
	appendEntry(t, f.app, credit(p, -(bal-100), clock.Now())) // down to 100: low, not depleted
	clock.Advance(time.Minute)
	if _, err := r.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if evs := events(t, f, p); len(evs) != 3 || evs[2].Kind != api.EventBillingLowBalance {
		t.Errorf("events after the second crossing %+v; want a second low-balance warning", evs)
	}
	mustVerify(t, f.app)
}

func TestStillDepleted(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := f.project(t)
	now := time.Now().UTC()
	check := func() bool {
		var due bool
		err := pgx.BeginFunc(ctx, f.app, func(tx pgx.Tx) (err error) {
			due, err = billing.StillDepleted(ctx, tx, p, time.Minute, now)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return due
	}
	if check() {
		t.Error("project without an account is depleted")
	}
	appendEntry(t, f.app, credit(p, -5, now))
	if check() {
		t.Error("negative but never marked depleted: due")
	}
	if _, err := f.app.Exec(ctx, `UPDATE billing_accounts SET depleted_at = $2 WHERE project_id = $1`, p, now.Add(-30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if check() {
		t.Error("due before the grace period ended")
	}
	if _, err := f.app.Exec(ctx, `UPDATE billing_accounts SET depleted_at = $2 WHERE project_id = $1`, p, now.Add(-2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if !check() {
		t.Error("not due after the grace period")
	}
	appendEntry(t, f.app, credit(p, 10, now))
	if check() {
		t.Error("due with a positive balance")
	}
}
