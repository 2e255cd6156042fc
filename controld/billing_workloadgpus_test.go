package controld_test

import (
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestBillingUsageCountsEachWorkloadsOwnGPUs (docs/apps.md, "Metering"):
// on an 8-GPU allocation, workloads that ran 20 minutes with all its
// GPUs, its first 2 and none (gpus: 0) used 9600, 2400 and 0
// GPU-seconds; the allocation is charged exactly its price for its
// time, as without them (never twice).
func TestBillingUsageCountsEachWorkloadsOwnGPUs(t *testing.T) {
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
	a := e.activate(t, c, "h100-baremetal", 8)
	runs := map[string]api.AppRunRequest{
		"all":  {Image: "tiny", AllocationID: a.ID, Name: "all"},
		"two":  {Image: "tiny", AllocationID: a.ID, Name: "two", GPUs: 2},
		"none": {Image: "tiny", AllocationID: a.ID, Name: "none", NoGPUs: true},
	}
	ids := map[string]string{}
	started := clock.Now()
	for name, req := range runs {
		w, err := c.AppRun(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ids[name] = w.ID
		if _, err := e.Server.Pool().Exec(ctx, `UPDATE workloads SET state = 'stopped', started_at = $2, ended_at = $3 WHERE id = $1`,
			w.ID, started, started.Add(20*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Hour)
	e.tick(t)

	resp, err := c.BillingUsage(ctx, api.BillingUsageRequest{Workloads: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]api.WorkloadUsage{}
	for _, u := range resp.Workloads {
		got[u.WorkloadID] = u
	}
	for name, want := range map[string]struct{ gpus, gpuSeconds int64 }{"all": {8, 9600}, "two": {2, 2400}, "none": {0, 0}} {
		u := got[ids[name]]
		if u.Seconds != 1200 || u.GPUSeconds != want.gpuSeconds || int64(u.GPUs) != want.gpus {
			t.Errorf("%s: %d s, %d GPUs, %d GPU-seconds; want 1200 s, %d GPUs, %d GPU-seconds", name, u.Seconds, u.GPUs,
				u.GPUSeconds, want.gpus, want.gpuSeconds)
		}
	}
	au, err := c.BillingUsage(ctx, api.BillingUsageRequest{Allocation: a.ID})
	if err != nil || len(au.Usage) != 1 || au.Usage[0].AmountMinor != 220*8 {
		t.Errorf("the allocation's usage: %+v, %v; want 1760 for its hour, as without workloads", au, err)
	}
}
