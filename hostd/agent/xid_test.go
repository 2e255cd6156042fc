package agent_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/sim"
	hostdtasks "github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// offsetClock is the real clock moved forward by Advance: tasks and
// their deadlines keep running while billing sees time pass.
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) Now() time.Time { return time.Now().UTC().Add(time.Duration(c.offset.Load())) }

func (c *offsetClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// simFleet is controld on a settable clock with one sim slice host run by
// a real agent with the real task handlers, on the same clock.
type simFleet struct {
	env   *controldtest.Env
	admin *api.Client
	clock *offsetClock
	host  *sim.Host
	agent *runningAgent
	// term is the agent's terminal server, when it has one (its way
	// into slice VMs).
	term agent.Terminal
}

func startSimFleet(t *testing.T, tune ...func(*agent.Config)) *simFleet {
	t.Helper()
	return startSimFleetOn(t, api.ShapeGPUSlice, sim.H200Slice8(), tune...)
}

// startSimFleetOn is startSimFleet with a sim host of another shape and
// profile.
func startSimFleetOn(t *testing.T, shape string, profile sim.Profile, tune ...func(*agent.Config)) *simFleet {
	t.Helper()
	clock := &offsetClock{}
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, Now: clock.Now,
		Billing: controld.BillingConfig{Window: time.Minute},
		Hosts:   controld.HostsConfig{HeartbeatInterval: 200 * time.Millisecond, DownAfter: 24 * time.Hour, AutoApproveSlots: true}})
	admin := env.UserClient(t, env.Admin.ID, env.AdminToken)
	dir := t.TempDir()
	h, err := sim.NewHost(dir, profile, "xid-sim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	tok, err := admin.NodeEnroll(context.Background(), api.EnrollTokenRequest{Name: "xid-sim", Shape: shape})
	if err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, env, dir, tok.Token, hostdtasks.New(hostdtasks.Config{PollInterval: 10 * time.Millisecond}),
		append([]func(*agent.Config){func(c *agent.Config) { c.Env = h.Env("", nil); c.Now = clock.Now }}, tune...)...)
	readyNode(t, admin, a.NodeID())
	return &simFleet{env: env, admin: admin, clock: clock, host: h, agent: a}
}

// slotOf returns a node's slot holding a GPU.
func (f *simFleet) slotOf(t *testing.T, gpu string) api.Slot {
	t.Helper()
	d, err := f.admin.NodeGet(context.Background(), f.agent.NodeID())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range d.Slots {
		if s.GPUPCI == gpu {
			return s
		}
	}
	t.Fatalf("no slot with GPU %s", gpu)
	return api.Slot{}
}

// TestInjectedXIDQuarantinesNotifiesAndCredits: an XID in the kernel log
// of an allocated GPU reaches controld as a signed fault report; the slot
// is quarantined, the allocation's user gets the notice, and what was
// charged since the fault is credited.
func TestInjectedXIDQuarantinesNotifiesAndCredits(t *testing.T) {
	t.Parallel()
	f := startSimFleet(t)
	ctx := t.Context()
	evs, err := f.admin.SubscribeEvents(ctx, f.env.Admin.ID)
	if err != nil {
		t.Fatal(err)
	}
	al, err := f.admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	waitAlloc(t, f.admin, al.ID, api.AllocActive)
	f.clock.Advance(time.Hour) // an hour of use
	if _, err := f.env.Server.BillingTick(ctx); err != nil {
		t.Fatal(err)
	}
	gpu := al.Slots[1].GPUPCI
	if err := f.host.InjectXID(gpu, 79); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "slot quarantined", func() bool {
		s := f.slotOf(t, gpu)
		return s.Quarantine != nil && s.Quarantine.Reason == "xid 79" && s.AllocationID == al.ID
	})
	deadline := time.After(30 * time.Second)
	for got := false; !got; {
		select {
		case ev := <-evs:
			if ev.Kind == api.EventAllocNotice && ev.Subject == al.ID {
				got = true
			}
		case <-deadline:
			t.Fatal("no alloc.notice event")
		}
	}
	// The credit is what the windows ending after the fault charged.
	var faultAt time.Time
	if err := f.env.Server.Pool().QueryRow(ctx, `SELECT at FROM gpu_faults WHERE gpu_pci = $1`, gpu).Scan(&faultAt); err != nil {
		t.Fatal(err)
	}
	u, _, err := billing.AllocationWindows(ctx, f.env.Server.Pool(), al.ID)
	if err != nil {
		t.Fatal(err)
	}
	var since int64
	for _, w := range u.Windows {
		if w.End.After(faultAt) {
			since += w.AmountMinor
		}
	}
	var credit int64
	if err := f.env.Server.Pool().QueryRow(ctx, `SELECT amount_minor FROM ledger_entries WHERE reference = $1`,
		billing.FaultCreditReference(al.ID)).Scan(&credit); err != nil {
		t.Fatalf("no credit: %v", err)
	}
	if credit != since || credit <= 0 || u.StoppedAt == nil {
		t.Fatalf("credit %d; want the %d charged since the fault at %s, and the meter stopped (%v)", credit, since, faultAt, u.StoppedAt)
	}
	checks, err := billing.Verify(ctx, f.env.Server.Pool())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if !c.OK() {
			t.Errorf("ledger verify: %+v", c)
		}
	}
}

// TestPreHandoutCheckFailureQuarantines: GPUs failing the pre-handout
// check make the provisioning fail before anything is done with them; the
// allocation ends failed and never charged, and exactly its slots are
// quarantined (slots it did not get are left alone).
func TestPreHandoutCheckFailureQuarantines(t *testing.T) {
	t.Parallel()
	f := startSimFleet(t)
	ctx := t.Context()
	d, err := f.admin.NodeGet(ctx, f.agent.NodeID())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range d.Slots {
		f.host.FailGPUCheck(s.GPUPCI, "does not answer")
	}
	al, err := f.admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := waitAlloc(t, f.admin, al.ID, api.AllocFailed)
	if !strings.Contains(got.Reason, api.PhaseGPUCheck) || !strings.Contains(got.Reason, al.Slots[0].GPUPCI) {
		t.Errorf("reason %q; want the GPU check naming %s", got.Reason, al.Slots[0].GPUPCI)
	}
	if _, metered, err := billing.AllocationUsage(ctx, f.env.Server.Pool(), al.ID); err != nil || metered {
		t.Errorf("usage of the failed allocation: metered %v (%v); want none", metered, err)
	}
	mine := map[string]bool{al.Slots[0].GPUPCI: true, al.Slots[1].GPUPCI: true}
	testutil.Eventually(t, "its slots quarantined and free", func() bool {
		d, err := f.admin.NodeGet(ctx, f.agent.NodeID())
		if err != nil {
			return false
		}
		for _, s := range d.Slots {
			if (s.Quarantine != nil) != mine[s.GPUPCI] || (mine[s.GPUPCI] && s.State != api.SlotFree) {
				return false
			}
		}
		return d.Node.SlotsQuarantined == 2 && d.Node.SlotsFree == 6
	})
	// The quarantined slots are not handed out again.
	for _, s := range d.Slots {
		f.host.PassGPUCheck(s.GPUPCI)
	}
	next, err := f.admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range next.Slots {
		if mine[s.GPUPCI] {
			t.Errorf("slot with GPU %s handed out again while quarantined", s.GPUPCI)
		}
	}
	waitAlloc(t, f.admin, next.ID, api.AllocActive)
}

// TestFaultReportLostWhileControldDownIsResent: a fault seen while no
// controld answers is kept — its GPU fails the pre-handout check
// meanwhile — and sent again once controld is back; once acknowledged,
// the slot's quarantine keeps the GPU out and the check passes it.
func TestFaultReportLostWhileControldDownIsResent(t *testing.T) {
	t.Parallel()
	f := startSimFleet(t)
	ctx := t.Context()
	d, err := f.admin.NodeGet(ctx, f.agent.NodeID())
	if err != nil {
		t.Fatal(err)
	}
	gpu := d.Slots[6].GPUPCI
	f.env.Restart(t, func() {
		if err := f.host.InjectXID(gpu, 48); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "the agent to see the XID", func() bool {
			_, faulty := f.agent.GPUFault(gpu)
			return faulty
		})
		if _, faulty := f.agent.GPUFault(d.Slots[5].GPUPCI); faulty {
			t.Error("another GPU fails the check")
		}
	})
	admin := f.env.Client(f.env.AdminToken)
	testutil.Eventually(t, "the resent fault to quarantine the slot", func() bool {
		d, err := admin.NodeGet(ctx, f.agent.NodeID())
		return err == nil && d.Slots[6].Quarantine != nil && d.Slots[6].Quarantine.Reason == "xid 48"
	})
	testutil.Eventually(t, "the acknowledged fault to leave the check", func() bool {
		_, faulty := f.agent.GPUFault(gpu)
		return !faulty
	})
	if n := count(t, f.env, `SELECT count(*) FROM gpu_faults`); n != 1 {
		t.Errorf("%d faults recorded; want 1", n)
	}
}

func count(t *testing.T, env *controldtest.Env, sql string) int {
	t.Helper()
	var n int
	if err := env.Server.Pool().QueryRow(t.Context(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
