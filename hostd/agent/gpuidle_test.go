package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/sim"
	hostdtasks "github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/term"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// startIdleSimFleet is startSimFleet with an idle evaluator the test
// ticks itself (periods of a minute or more, warnings 30s ahead) and an
// agent that samples its GPUs every 50ms.
func startIdleSimFleet(t *testing.T) *simFleet {
	t.Helper()
	clock := &offsetClock{}
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, Now: clock.Now,
		Billing: controld.BillingConfig{Window: time.Minute},
		Idle:    controld.IdleConfig{MinPeriod: time.Minute, WarnAhead: 30 * time.Second, Interval: time.Hour},
		Hosts:   controld.HostsConfig{HeartbeatInterval: 200 * time.Millisecond, DownAfter: 24 * time.Hour, AutoApproveSlots: true}})
	admin := env.UserClient(t, env.Admin.ID, env.AdminToken)
	dir := t.TempDir()
	h, err := sim.NewHost(dir, sim.H200Slice8(), "idle-sim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	// A slice's GPUs are read inside its VM (the host's nvidia-smi does
	// not see vfio-bound GPUs): the terminal server is the way in.
	ts, err := term.New(term.Config{StateDir: dir, Accounts: h.Users.Accounts(), Hypervisor: h.Hypervisor, Log: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Close() })
	a := startAgent(t, env, dir, enroll(t, admin, "idle-sim"), hostdtasks.New(hostdtasks.Config{PollInterval: 10 * time.Millisecond}),
		func(c *agent.Config) {
			c.Env = h.Env("", nil)
			c.Terminal = ts
			c.Now = clock.Now
			c.GPUSampleInterval = 50 * time.Millisecond
		})
	readyNode(t, admin, a.NodeID())
	return &simFleet{env: env, admin: admin, clock: clock, host: h, agent: a, term: ts}
}

func (f *simFleet) idleTick(t *testing.T) (warned, released int) {
	t.Helper()
	res, err := f.env.Server.IdleTick(t.Context())
	if err != nil || res.Skipped {
		t.Fatalf("idle tick: %+v, %v", res, err)
	}
	return res.Warned, res.Released
}

// TestBusyGPUKeepsAllocationPastIdlePeriods is the end-to-end join of GPU
// telemetry and idle release: a real agent samples a sim GPU the sim
// keeps at 80 %, its heartbeats carry the GPU's activity, and controld's
// idle evaluator sees it — the allocation, under a 2m idle policy with no
// session ever opened, is neither warned nor released across several
// idle periods. Once the GPU is at 0 % it is warned, then released with
// reason idle.
func TestBusyGPUKeepsAllocationPastIdlePeriods(t *testing.T) {
	t.Parallel()
	f := startIdleSimFleet(t)
	ctx := t.Context()
	al, err := f.admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1, IdleReleaseAfter: "2m"})
	if err != nil {
		t.Fatal(err)
	}
	waitAlloc(t, f.admin, al.ID, api.AllocActive)
	gpu := al.Slots[0].GPUPCI
	if err := f.host.SetGPULoad(gpu, 80); err != nil {
		t.Fatal(err)
	}
	// Four idle periods' worth of time, 90s at a time: each step waits for
	// a heartbeat to report the GPU busy at the moved clock, then ticks.
	for i := range 4 {
		f.clock.Advance(90 * time.Second)
		movedTo := f.clock.Now()
		testutil.Eventually(t, "a heartbeat reporting the busy GPU after the clock moved", func() bool {
			a, err := f.admin.AllocGet(ctx, al.ID)
			return err == nil && a.Policy != nil && a.Policy.LastActiveAt != nil && !a.Policy.LastActiveAt.Before(movedTo)
		})
		if w, r := f.idleTick(t); w != 0 || r != 0 {
			t.Fatalf("tick %d (%v after activation, GPU at 80%%): warned %d, released %d; want neither", i, time.Duration(i+1)*90*time.Second, w, r)
		}
	}
	if a, err := f.admin.AllocGet(ctx, al.ID); err != nil || a.State != api.AllocActive {
		t.Fatalf("after six minutes of a busy GPU: %+v, %v; want active", a, err)
	}

	// The GPU goes quiet: once a sample has seen it at 0 %, its last
	// activity (at most now) no longer moves.
	if err := f.host.SetGPULoad(gpu, 0); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "a sample of the GPU at 0%", func() bool {
		top, err := f.admin.AllocTop(ctx, al.ID)
		return err == nil && len(top.GPUs) == 1 && top.GPUs[0].UtilizationPct != nil && *top.GPUs[0].UtilizationPct == 0
	})
	f.clock.Advance(100 * time.Second) // past the warning, 30s before a 2m deadline
	if w, r := f.idleTick(t); w != 1 || r != 0 {
		t.Fatalf("tick 100s after the GPU went quiet: warned %d, released %d; want one warning", w, r)
	}
	f.clock.Advance(time.Minute) // past the deadline
	if w, r := f.idleTick(t); r != 1 {
		t.Fatalf("tick 160s after the GPU went quiet: warned %d, released %d; want one release", w, r)
	}
	got, err := f.admin.AllocGet(context.Background(), al.ID)
	if err != nil || (got.State != api.AllocReleasing && got.State != api.AllocReleased) || got.Reason != api.ReasonIdle {
		t.Fatalf("after the deadline: %s (%q), %v; want released with reason idle", got.State, got.Reason, err)
	}
}

// TestBusyGPUCountsActiveBetweenSamples is the regression test of idle
// warnings for GPUs that never stopped: heartbeats used to carry the time
// of the last busy sample, so between samples a busy GPU's activity aged
// by up to a sample interval, and an idle period near that (seconds in
// `gpuaas dev`) warned or released it. A GPU its latest sample found busy
// now counts as busy at each heartbeat: here a single sample (the agent
// samples once an hour) keeps the allocation active for as long as the
// test runs.
func TestBusyGPUCountsActiveBetweenSamples(t *testing.T) {
	t.Parallel()
	f := startIdleSimFleet(t)
	ctx := t.Context()
	d, err := f.admin.NodeGet(ctx, f.agent.NodeID())
	if err != nil {
		t.Fatal(err)
	}
	f.agent.stop()
	for _, s := range d.Slots {
		if err := f.host.SetGPULoad(s.GPUPCI, 80); err != nil {
			t.Fatal(err)
		}
	}
	f.agent = startAgent(t, f.env, f.host.StateDir, "", hostdtasks.New(hostdtasks.Config{PollInterval: 10 * time.Millisecond}),
		func(c *agent.Config) {
			c.Env = f.host.Env("", nil)
			c.Terminal = f.term
			c.Now = f.clock.Now
			c.GPUSampleInterval = time.Hour // the one sample is the one after provisioning
		})
	al, err := f.admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1, IdleReleaseAfter: "2m"})
	if err != nil {
		t.Fatal(err)
	}
	waitAlloc(t, f.admin, al.ID, api.AllocActive)
	for i := range 3 {
		f.clock.Advance(90 * time.Second)
		movedTo := f.clock.Now()
		testutil.Eventually(t, "a heartbeat counting the GPU busy at the moved clock", func() bool {
			a, err := f.admin.AllocGet(ctx, al.ID)
			return err == nil && a.Policy != nil && a.Policy.LastActiveAt != nil && !a.Policy.LastActiveAt.Before(movedTo)
		})
		if w, r := f.idleTick(t); w != 0 || r != 0 {
			t.Fatalf("tick %d: warned %d, released %d; want neither", i, w, r)
		}
	}
}
