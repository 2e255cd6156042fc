package idle_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/idle"
	"github.com/gpuaas/gpuaas/controld/singleton"
	"github.com/gpuaas/gpuaas/internal/api"
)

// notices counts the alloc.notice events of an allocation, by kind.
func (e *env) notices(t *testing.T, allocID, kind string) int {
	t.Helper()
	return e.count(t, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND subject = $2 AND payload->>'kind' = $3`,
		api.EventAllocNotice, allocID, kind)
}

// TestIdleWarnsOnceThenReleases: an allocation under a project's 20-minute
// idle period is warned once, 10 minutes ahead (an alloc.notice event to
// its members, in the tick's transaction), and released once the period
// is over, by the platform, with its audit row.
func TestIdleWarnsOnceThenReleases(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := e.active(t)
	if _, err := e.settings.SetProjectPolicy(ctx, e.pool, e.project, 20*60, t0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at               time.Duration
		warned, released int
		notices          int
		state            string
	}{
		{5 * time.Minute, 0, 0, 0, api.AllocActive},
		{9 * time.Minute, 0, 0, 0, api.AllocActive},
		{10 * time.Minute, 1, 0, 1, api.AllocActive},
		{15 * time.Minute, 0, 0, 1, api.AllocActive}, // once per deadline
		{20 * time.Minute, 0, 1, 1, api.AllocReleasing},
		{25 * time.Minute, 0, 0, 1, api.AllocReleasing},
	} {
		res := e.tick(t, t0.Add(tc.at))
		if res.Warned != tc.warned || res.Released != tc.released || res.Skipped {
			t.Errorf("tick at +%v: got %+v; want warned %d, released %d", tc.at, res, tc.warned, tc.released)
		}
		if n := e.notices(t, id, api.NoticeIdleWarning); n != tc.notices {
			t.Errorf("after +%v: %d idle warnings; want %d", tc.at, n, tc.notices)
		}
		if s := e.state(t, id); s != tc.state {
			t.Errorf("after +%v: state %s; want %s", tc.at, s, tc.state)
		}
	}
	var users []string
	if err := e.pool.QueryRow(ctx, `SELECT users FROM outbox_events WHERE kind = $1 AND subject = $2`,
		api.EventAllocNotice, id).Scan(&users); err != nil || len(users) != 1 || users[0] != e.user {
		t.Errorf("warning's recipients: got %v, %v; want the project's member %s", users, err, e.user)
	}
	if n := e.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'alloc.idle_release' AND target_id = $1 AND actor_id = $2`,
		id, idle.SystemActor); n != 1 {
		t.Errorf("audit rows of the idle release: got %d; want 1", n)
	}
}

// TestActivityPostponesTheRelease: channel data after the warning moves
// the deadline: no release when the old one passes, a new warning before
// the new one. A gateway's clock ahead of controld's counts as now.
func TestActivityPostponesTheRelease(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := e.active(t)
	if _, err := e.settings.SetProjectPolicy(ctx, e.pool, e.project, 20*60, t0); err != nil {
		t.Fatal(err)
	}
	if res := e.tick(t, t0.Add(12*time.Minute)); res.Warned != 1 {
		t.Fatalf("tick at +12m: got %+v; want one warning", res)
	}
	// Used at +14m, reported by a gateway whose clock says +1h.
	n, err := idle.RecordGateActivity(ctx, e.pool, map[string]time.Time{id: t0.Add(time.Hour)}, t0.Add(14*time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("record activity: got %d, %v; want 1", n, err)
	}
	if res := e.tick(t, t0.Add(21*time.Minute)); res.Released != 0 || e.state(t, id) != api.AllocActive {
		t.Errorf("tick at +21m after activity at +14m: got %+v, state %s; want nothing released", res, e.state(t, id))
	}
	// The new deadline is +34m (the future report clamped to +14m),
	// warned from +24m.
	if res := e.tick(t, t0.Add(24*time.Minute)); res.Warned != 1 {
		t.Errorf("tick at +24m: got %+v; want a new warning for the new deadline", res)
	}
	if res := e.tick(t, t0.Add(34*time.Minute)); res.Released != 1 {
		t.Errorf("tick at +34m: got %+v; want the release", res)
	}
}

// TestMaxDuration: an allocation's own maximum duration is warned once
// and released when it is reached, with no project policy at all; an
// allocation with neither is left alone.
func TestMaxDuration(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	capped, free := e.active(t), e.active(t)
	hour := int64(3600)
	if err := idle.SetAllocation(ctx, e.pool, capped, nil, &hour); err != nil {
		t.Fatal(err)
	}
	e.tick(t, t0.Add(55*time.Minute))
	e.tick(t, t0.Add(56*time.Minute))
	if n := e.notices(t, capped, api.NoticeMaxDuration); n != 1 {
		t.Errorf("max-duration warnings: got %d; want 1", n)
	}
	e.tick(t, t0.Add(time.Hour))
	if s := e.state(t, capped); s != api.AllocReleasing {
		t.Errorf("capped allocation after its maximum duration: state %s; want releasing", s)
	}
	if s := e.state(t, free); s != api.AllocActive {
		t.Errorf("allocation without policy: state %s; want active", s)
	}
	if n := e.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'alloc.max_duration_release'`); n != 1 {
		t.Errorf("audit rows of max-duration releases: got %d; want 1", n)
	}
}

// TestTickSkipsWhileAnotherReplicaRuns: while another transaction holds
// the evaluator's lock, a tick does nothing at all.
func TestTickSkipsWhileAnotherReplicaRuns(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := e.active(t)
	if _, err := e.settings.SetProjectPolicy(ctx, e.pool, e.project, 20*60, t0); err != nil {
		t.Fatal(err)
	}
	other, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(ctx) }()
	if ok, err := singleton.TryLock(ctx, other, "gpuaas.idle.evaluator"); err != nil || !ok {
		t.Fatalf("take the evaluator's lock: %v, %v", ok, err)
	}
	if res := e.tick(t, t0.Add(30*time.Minute)); !res.Skipped || res.Released != 0 {
		t.Errorf("tick while locked: got %+v; want skipped", res)
	}
	if s := e.state(t, id); s != api.AllocActive {
		t.Errorf("state after a skipped tick: %s; want active", s)
	}
	_ = other.Rollback(ctx)
	if res := e.tick(t, t0.Add(30*time.Minute)); res.Skipped || res.Released != 1 {
		t.Errorf("tick once the lock is free: got %+v; want the release", res)
	}
}

// TestProjectPolicyStartsTheClock: a new project period starts its
// allocations' idle clock when it is set, so nothing is released
// without its warning; setting the same period again keeps the clock.
func TestProjectPolicyStartsTheClock(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := e.active(t)
	setAt := t0.Add(2 * time.Hour)
	pol, err := e.settings.SetProjectPolicy(ctx, e.pool, e.project, 20*60, setAt)
	if err != nil {
		t.Fatal(err)
	}
	if len(pol.Affected) != 1 || pol.Affected[0].AllocationID != id || !pol.Affected[0].ReleaseAt.Equal(setAt.Add(20*time.Minute)) {
		t.Errorf("affected: got %+v; want %s released at %v", pol.Affected, id, setAt.Add(20*time.Minute))
	}
	again, err := e.settings.SetProjectPolicy(ctx, e.pool, e.project, 20*60, setAt.Add(time.Hour))
	if err != nil || !again.UpdatedAt.Equal(setAt) {
		t.Errorf("same period again: updated_at %v, %v; want it kept at %v", again.UpdatedAt, err, setAt)
	}
	if res := e.tick(t, setAt.Add(time.Minute)); res.Released != 0 {
		t.Errorf("tick a minute after the policy was set: got %+v; want no release", res)
	}
	err = pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		_, err := e.settings.SetProjectPolicy(ctx, tx, e.project, 0, setAt)
		return err
	})
	if err != nil || e.count(t, `SELECT count(*) FROM idle_project_policies`) != 0 {
		t.Errorf("policy off: %v; want its row gone", err)
	}
}

// TestParsePeriod: "" is unset, "off" only where allowed, otherwise a
// whole-second duration between the minimum and a year;
// everything else is invalid_argument.
func TestParsePeriod(t *testing.T) {
	for _, tc := range []struct {
		in   string
		off  bool
		want int64 // -1 unset
		code api.Code
	}{
		{"", true, -1, ""},
		{"off", true, 0, ""},
		{"off", false, 0, api.CodeInvalidArgument},
		{"30m", false, 1800, ""},
		{" 2h ", false, 7200, ""},
		{"59s", false, 0, api.CodeInvalidArgument},
		{"1m500ms", false, 0, api.CodeInvalidArgument},
		{"367d", false, 0, api.CodeInvalidArgument},
		{"9000h", false, 0, api.CodeInvalidArgument},
		{"soon", false, 0, api.CodeInvalidArgument},
	} {
		got, err := idle.ParsePeriod("idle period", tc.in, time.Minute, tc.off)
		switch {
		case tc.code != "":
			endpointtest.WantCode(t, "ParsePeriod("+tc.in+")", err, tc.code)
		case err != nil:
			t.Errorf("ParsePeriod(%q): %v", tc.in, err)
		case tc.want == -1 && got != nil:
			t.Errorf("ParsePeriod(%q): got %d; want unset", tc.in, *got)
		case tc.want >= 0 && (got == nil || *got != tc.want):
			t.Errorf("ParsePeriod(%q): got %v; want %d", tc.in, got, tc.want)
		}
	}
}
