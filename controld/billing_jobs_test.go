package controld_test

import (
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestBillingUsageJobs is `billing usage --job` (docs/jobs.md, "Cost"): a
// job on an allocation kept before and after it (release: keep) costs its
// allocation's charge over its own running time only — from mid-way
// through one charged window to the end of the next, pro rata and
// rounded down once — the allocation's whole charge shown beside it; a
// job that never started costs nothing; one job is asked for by id; a
// non-member learns nothing; --job with --alloc is refused.
//
// The job's start and end are written as the node's signed report would
// set them (controld/jobs settles them; no hostd runs here).
func TestBillingUsageJobs(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute})
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	e.credit(t, 100_00)
	a := e.activate(t, c, "h200-slice", 2) // 350 per GPU-hour: 700 an hour
	activeAt := e.clock.Now()
	setJob := func(id, state string, startedAt, endedAt any) {
		t.Helper()
		if _, err := e.Server.Pool().Exec(ctx, `UPDATE jobs SET state = $2, started_at = $3, ended_at = $4 WHERE id = $1`,
			id, state, startedAt, endedAt); err != nil {
			t.Fatal(err)
		}
	}

	e.clock.Advance(5 * time.Minute)
	j, err := c.JobCreate(ctx, api.JobCreateRequest{AllocationID: a.ID, Name: "train", Run: "true", Release: "keep"})
	if err != nil {
		t.Fatal(err)
	}
	started := e.clock.Now()
	setJob(j.ID, api.JobRunning, started, nil)
	e.clock.Advance(5 * time.Minute)
	e.tick(t) // window [0, 10m): the job ran in its second half
	e.clock.Advance(30 * time.Minute)
	ended := e.clock.Now()
	setJob(j.ID, api.JobSucceeded, started, ended)
	e.tick(t) // window [10m, 40m): all the job's
	e.clock.Advance(20 * time.Minute)
	e.tick(t) // window [40m, 60m): the allocation's, kept after the job
	idle, err := c.JobCreate(ctx, api.JobCreateRequest{AllocationID: a.ID, Name: "never", Run: "true", Release: "keep"})
	if err != nil {
		t.Fatal(err)
	}

	resp, err := c.BillingUsage(ctx, api.BillingUsageRequest{Jobs: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Jobs) != 2 {
		t.Fatalf("jobs' usage: %+v; want 2 jobs", resp.Jobs)
	}
	got := map[string]api.JobUsage{}
	for _, u := range resp.Jobs {
		got[u.JobID] = u
	}
	// 700 × 300 s / 3600 of the first window's 116 (700 × 600 / 3600,
	// rounded down) is 58.0; the second window is 466 - 116 = 350.
	wantCost := int64(58 + 350)
	if u := got[j.ID]; u.Seconds != 35*60 || u.AmountMinor != wantCost || u.Name != "train" || u.State != api.JobSucceeded ||
		u.AllocationID != a.ID || u.SKU != "h200-slice" || u.GPUs != 2 || u.AllocationAmountMinor != 700 ||
		u.StartedAt == nil || !u.StartedAt.Equal(started) || u.EndedAt == nil || !u.EndedAt.Equal(ended) {
		t.Errorf("the kept allocation's job: %+v; want 2100 s costing %d of the allocation's 700 (active since %v)", u, wantCost, activeAt)
	}
	if u := got[idle.ID]; u.Seconds != 0 || u.AmountMinor != 0 || u.State != api.JobStarting || u.StartedAt != nil {
		t.Errorf("the job that never started: %+v; want nothing charged", u)
	}
	if resp.TotalMinor != wantCost || resp.ProjectID != e.Project.ID {
		t.Errorf("total %d of %s; want %d of %s", resp.TotalMinor, resp.ProjectID, wantCost, e.Project.ID)
	}

	one, err := c.BillingUsage(ctx, api.BillingUsageRequest{Job: j.ID})
	if err != nil || len(one.Jobs) != 1 || one.Jobs[0].JobID != j.ID || one.Jobs[0].AmountMinor != wantCost || one.TotalMinor != wantCost {
		t.Errorf("one job's usage: %+v, %v; want %s costing %d", one, err, j.ID, wantCost)
	}
	_, tok := e.AddUser(t, "stranger@example.test", api.RoleUser)
	stranger := e.Client(tok)
	if _, err := stranger.BillingUsage(ctx, api.BillingUsageRequest{Job: j.ID}); api.CodeOf(err) != api.CodeNotFound {
		t.Errorf("a non-member's --job %s: %v; want not found", j.ID, err)
	}
	if _, err := c.BillingUsage(ctx, api.BillingUsageRequest{Jobs: true, Allocation: a.ID}); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Errorf("--job with --alloc: %v; want invalid argument", err)
	}
}
