package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestReadmeQueuedCreateTimesOut follows the README's queued create: with
// the one bare-metal host taken, `alloc create --queue --wait --timeout`
// exits 21 saying the request is still queued, where in line, and how to
// cancel it; `alloc get` shows its place; --cancel-on-timeout releases it.
func TestReadmeQueuedCreateTimesOut(t *testing.T) {
	dev, _ := loggedInDev(t)
	dev.createID(t, "--sku", "h100-baremetal")
	r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h100-baremetal", "--queue", "--wait", "--timeout", "5s")
	if r.code != 21 || !strings.Contains(r.stderr, "is still queued (1st in line for h100-baremetal)") ||
		!strings.Contains(r.stderr, "Cancel it with `gpuaas alloc release a-") {
		t.Fatalf("queued create timing out: exit %d, stderr %q; want 21, still queued, how to cancel", r.code, r.stderr)
	}
	id, _, _ := strings.Cut(r.stderr, " ")
	var a api.Allocation
	dev.gpuaasJSON(t, &a, "alloc", "get", id, "--json")
	if a.State != api.AllocRequested || !a.Queued || a.QueuePosition != 1 {
		t.Fatalf("alloc get %s: %s queued=%v position %d; want still queued, first in line", id, a.State, a.Queued, a.QueuePosition)
	}
	r = dev.gpuaas(t, "", "alloc", "create", "--sku", "h100-baremetal", "--queue", "--wait", "--timeout", "5s", "--cancel-on-timeout")
	if r.code != 21 || !strings.Contains(r.stderr, "was still queued (2nd in line for h100-baremetal) after 5s: released it") {
		t.Fatalf("with --cancel-on-timeout: exit %d, stderr %q; want 21, released", r.code, r.stderr)
	}
	cancelled, _, _ := strings.Cut(r.stderr, " ")
	dev.gpuaasJSON(t, &a, "alloc", "get", cancelled, "--json")
	if a.State != api.AllocReleased || a.Queued {
		t.Fatalf("the cancelled request: %s queued=%v; want released", a.State, a.Queued)
	}
}

// TestReadmeIdlePolicySetWhileRunning follows "Idle release in dev" with
// allocations already running and idle for longer than the period:
// `project set dev --idle-release-after 30s` lists them and when they
// will be warned and released, releases none at once, and they go a
// period after the change (never in the second it was set).
func TestReadmeIdlePolicySetWhileRunning(t *testing.T) {
	dev, _ := loggedInDev(t)
	a1 := dev.createActive(t, "--sku", "h200-slice", "--gpus", "2")
	a2 := dev.createActive(t, "--sku", "h200-slice", "--gpus", "2")
	since := time.Now()
	testutil.EventuallyWithin(t, time.Minute, "the allocations to be idle longer than the period", func() bool {
		return time.Since(since) > 32*time.Second
	})
	setAt := time.Now()
	r := dev.gpuaas(t, "", "project", "set", "dev", "--idle-release-after", "30s")
	if r.code != 0 || !strings.Contains(r.stderr, "2 running allocations follow it") ||
		!strings.Contains(r.stderr, "  "+a1.ID+"  warned ") || !strings.Contains(r.stderr, "  "+a2.ID+"  warned ") {
		t.Fatalf("project set: exit %d, stderr %q; want the two running allocations listed", r.code, r.stderr)
	}
	get := func(id string) api.Allocation {
		t.Helper()
		var a api.Allocation
		dev.gpuaasJSON(t, &a, "alloc", "get", id, "--json")
		return a
	}
	// dev's evaluator runs every second: several ticks later both still run.
	testutil.EventuallyWithin(t, time.Minute, "a few idle ticks", func() bool { return time.Since(setAt) > 4*time.Second })
	for _, id := range []string{a1.ID, a2.ID} {
		if a := get(id); a.State != api.AllocActive || a.Policy == nil || a.Policy.IdleReleaseAt == nil ||
			a.Policy.IdleReleaseAt.Before(setAt.Add(30*time.Second).Truncate(time.Second)) {
			t.Fatalf("%s after the policy was set: %s (%q), policy %+v; want active, released no earlier than 30s after %v",
				id, a.State, a.Reason, a.Policy, setAt)
		}
	}
	for _, id := range []string{a1.ID, a2.ID} {
		testutil.EventuallyWithin(t, 2*time.Minute, id+" to be released as idle", func() bool {
			a := get(id)
			return a.Reason == api.ReasonIdle && (a.State == api.AllocReleasing || a.State == api.AllocReleased)
		})
	}
}
