package controld_test

import (
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestBillingUsageWorkloads is `billing usage --workload` (docs/apps.md,
// "Metering"): a workload that ran 20 minutes on an 8-GPU bare-metal
// allocation used 1200 s and 9600 GPU-seconds, and its share of the
// allocation's charged windows is the windows' amounts over its running
// time, pro rata and rounded down once (billing.Share, as a job's); the
// allocation is charged exactly what its price gives for its active
// time, window by window, as without the workload (nothing is charged
// twice, no window has a workload's part added); a workload that never
// ran used nothing; one is asked for by id; a stranger learns nothing;
// --workload with --alloc or --job is refused.
//
// The workload's start and end are written as the node's reports would
// set them (controld/workloads settles them; no hostd runs here).
func TestBillingUsageWorkloads(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	e := &billingEnv{Env: controldtest.Start(t, controldtest.Options{Now: clock.Now, Billing: controld.BillingConfig{Window: time.Minute},
		Unfunded: true, Registry: testRegistry(t)}), clock: clock}
	ctx := t.Context()
	c := e.UserClient(t, e.Admin.ID, e.AdminToken)
	e.credit(t, 100_00)
	if _, err := c.ImagePublish(ctx, api.ImagePublishRequest{Name: "tiny", Ref: pushTestImage(t, c, "tiny"), Platform: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := verify(t, c, "tiny"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ImagePromote(ctx, api.ImageChangeRequest{Image: "tiny"}); err != nil {
		t.Fatal(err)
	}
	a := e.activate(t, c, "h100-baremetal", 8) // 220 per GPU-hour: 1760 an hour
	setWorkload := func(id, state string, startedAt, endedAt any) {
		t.Helper()
		if _, err := e.Server.Pool().Exec(ctx, `UPDATE workloads SET state = $2, started_at = $3, ended_at = $4 WHERE id = $1`,
			id, state, startedAt, endedAt); err != nil {
			t.Fatal(err)
		}
	}

	e.clock.Advance(10 * time.Minute)
	w, err := c.AppRun(ctx, api.AppRunRequest{Image: "tiny", AllocationID: a.ID, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	started := e.clock.Now()
	setWorkload(w.ID, api.WorkloadRunning, started, nil)
	e.clock.Advance(5 * time.Minute)
	e.tick(t) // window [0, 15m): the workload ran in its last third
	e.clock.Advance(15 * time.Minute)
	ended := e.clock.Now()
	setWorkload(w.ID, api.WorkloadStopped, started, ended)
	e.tick(t) // window [15m, 30m): all the workload's
	e.clock.Advance(30 * time.Minute)
	e.tick(t) // window [30m, 60m): the allocation's alone
	never, err := c.AppRun(ctx, api.AppRunRequest{Image: "tiny", AllocationID: a.ID, Name: "never"})
	if err != nil {
		t.Fatal(err)
	}

	// The allocation: price × GPUs × seconds / 3600 in every window.
	au, err := c.BillingUsage(ctx, api.BillingUsageRequest{Allocation: a.ID})
	if err != nil || len(au.Usage) != 1 {
		t.Fatalf("the allocation's usage: %+v, %v", au, err)
	}
	var sum int64
	for _, win := range au.Usage[0].Windows {
		if want := 220 * 8 * win.Seconds / 3600; win.AmountMinor != want {
			t.Errorf("window %v–%v: %d; want %d, as without a workload", win.Start, win.End, win.AmountMinor, want)
		}
		sum += win.AmountMinor
	}
	if u := au.Usage[0]; u.AmountMinor != 1760 || sum != 1760 || u.Seconds != 3600 || len(u.Windows) != 3 {
		t.Errorf("the allocation: %d over %d s in %d windows (windows sum %d); want 1760 over 3600 s in 3", u.AmountMinor,
			u.Seconds, len(u.Windows), sum)
	}

	resp, err := c.BillingUsage(ctx, api.BillingUsageRequest{Workloads: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]api.WorkloadUsage{}
	for _, u := range resp.Workloads {
		got[u.WorkloadID] = u
	}
	// 440 × 300 / 900 of the first window (146.67) + the second's 440,
	// rounded down once.
	const wantCost = 586
	if u := got[w.ID]; len(resp.Workloads) != 2 || u.Seconds != 1200 || u.GPUSeconds != 9600 || u.AmountMinor != wantCost ||
		u.GPUs != 8 || u.SKU != "h100-baremetal" || u.AllocationID != a.ID || u.AllocationAmountMinor != 1760 ||
		u.State != api.WorkloadStopped || u.Name != "web" || u.Image != "tiny" ||
		u.StartedAt == nil || !u.StartedAt.Equal(started) || u.EndedAt == nil || !u.EndedAt.Equal(ended) {
		t.Errorf("the workload: %+v (of %d); want 1200 s, 9600 GPU-seconds, %d of the allocation's 1760", u, len(resp.Workloads), wantCost)
	}
	if u := got[never.ID]; u.Seconds != 0 || u.GPUSeconds != 0 || u.AmountMinor != 0 || u.StartedAt != nil {
		t.Errorf("the workload that never ran: %+v; want nothing used", u)
	}
	if resp.TotalMinor != wantCost || resp.ProjectID != e.Project.ID {
		t.Errorf("total %d of %s; want %d of %s", resp.TotalMinor, resp.ProjectID, wantCost, e.Project.ID)
	}

	// While it runs: to now.
	setWorkload(w.ID, api.WorkloadRunning, started, nil)
	one, err := c.BillingUsage(ctx, api.BillingUsageRequest{Workload: w.ID})
	if err != nil || len(one.Workloads) != 1 || one.Workloads[0].Seconds != 50*60 || one.Workloads[0].GPUSeconds != 8*50*60 ||
		one.Workloads[0].AmountMinor != 146+440+880 {
		t.Errorf("one running workload: %+v, %v; want 3000 s, 24000 GPU-seconds, 1466", one, err)
	}
	_, tok := e.AddUser(t, "stranger@example.test", api.RoleUser)
	if _, err := e.Client(tok).BillingUsage(ctx, api.BillingUsageRequest{Workload: w.ID}); api.CodeOf(err) != api.CodeNotFound {
		t.Errorf("a stranger's --workload %s: %v; want not found", w.ID, err)
	}
	for _, bad := range []api.BillingUsageRequest{{Workloads: true, Allocation: a.ID}, {Workload: w.ID, Jobs: true}, {Workloads: true, Volumes: true}} {
		if _, err := c.BillingUsage(ctx, bad); api.CodeOf(err) != api.CodeInvalidArgument {
			t.Errorf("%+v: %v; want invalid argument", bad, err)
		}
	}
}
