package controld_test

import (
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestIdlePolicySetOnRunningAllocationsWarnsFirst is the regression test
// of "`project set dev --idle-release-after 30s` released two running
// allocations in the same second, no warning": a project period set while
// allocations run (idle for longer than it) starts their idle clock at the
// change, so the next tick releases nothing; the reply lists them with
// when they would be warned and released; they are warned, then released
// a period after the change. Setting the same period again keeps the
// clock; a shorter one restarts it.
func TestIdlePolicySetOnRunningAllocationsWarnsFirst(t *testing.T) {
	t.Parallel()
	e := startIdle(t)
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	a1 := e.createActive(t, c, api.AllocCreateRequest{})
	a2 := e.createActive(t, c, api.AllocCreateRequest{})
	own := e.createActive(t, c, api.AllocCreateRequest{IdleReleaseAfter: "1h"})
	e.clock.Advance(3 * time.Hour) // all three idle since they became active
	changed := e.clock.Now()
	pol, err := c.ProjectSetPolicy(ctx, api.ProjectPolicyRequest{IdleReleaseAfter: "20m"})
	if err != nil {
		t.Fatal(err)
	}
	if !pol.UpdatedAt.Equal(changed) {
		t.Errorf("policy updated at %v; want %v", pol.UpdatedAt, changed)
	}
	got := map[string]api.PolicyAffected{}
	for _, a := range pol.Affected {
		got[a.AllocationID] = a
	}
	// own's idle period is its own 1h, due long ago: not the policy's doing.
	if len(got) != 2 || got[a1.ID].AllocationID == "" || got[a2.ID].AllocationID == "" {
		t.Fatalf("affected %+v; want %s and %s", pol.Affected, a1.ID, a2.ID)
	}
	for id, a := range got {
		if !a.ReleaseAt.Equal(changed.Add(20*time.Minute)) || !a.WarnAt.Equal(changed.Add(18*time.Minute)) {
			t.Errorf("affected %s: warn %v, release %v; want %v, %v", id, a.WarnAt, a.ReleaseAt,
				changed.Add(18*time.Minute), changed.Add(20*time.Minute))
		}
	}
	if res := e.idleTick(t); res.Released != 1 || res.Warned != 0 {
		t.Fatalf("tick right after the change: %+v; want only %s (its own 1h) released", res, own.ID)
	}
	if g, err := c.AllocGet(ctx, a1.ID); err != nil || g.State != api.AllocActive || g.Policy == nil ||
		g.Policy.IdleReleaseAt == nil || !g.Policy.IdleReleaseAt.Equal(changed.Add(20*time.Minute)) {
		t.Fatalf("alloc get %s after the change: %+v, %v; want active, released at %v", a1.ID, g, err, changed.Add(20*time.Minute))
	}
	e.clock.Advance(10 * time.Minute)
	// The same period again: the clock keeps running from the change.
	if again, err := c.ProjectSetPolicy(ctx, api.ProjectPolicyRequest{IdleReleaseAfter: "20m"}); err != nil ||
		!again.UpdatedAt.Equal(changed) || len(again.Affected) != 2 || !again.Affected[0].ReleaseAt.Equal(changed.Add(20*time.Minute)) {
		t.Fatalf("the same period again: %+v, %v; want the clock from %v", again, err, changed)
	}
	e.clock.Advance(8 * time.Minute)
	if res := e.idleTick(t); res.Warned != 2 || res.Released != 0 {
		t.Fatalf("tick 18m after the change: %+v; want two warnings", res)
	}
	// A shorter period restarts the clock: warned again before any release.
	shortened := e.clock.Now()
	if pol, err = c.ProjectSetPolicy(ctx, api.ProjectPolicyRequest{IdleReleaseAfter: "4m"}); err != nil || len(pol.Affected) != 2 ||
		!pol.Affected[0].ReleaseAt.Equal(shortened.Add(4*time.Minute)) {
		t.Fatalf("shortened: %+v, %v; want two released at %v", pol, err, shortened.Add(4*time.Minute))
	}
	if res := e.idleTick(t); res.Released != 0 {
		t.Fatalf("tick right after shortening: %+v; want no release", res)
	}
	e.clock.Advance(2 * time.Minute)
	if res := e.idleTick(t); res.Warned != 2 || res.Released != 0 {
		t.Fatalf("tick 2m after shortening: %+v; want two warnings", res)
	}
	e.clock.Advance(2 * time.Minute)
	if res := e.idleTick(t); res.Released != 2 {
		t.Fatalf("tick 4m after shortening: %+v; want two releases", res)
	}
}
