package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/sim"
	hostdtasks "github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestECCIncreaseQuarantinesNotifiesAndCredits: an increase of the
// uncorrected ECC count of an allocated GPU, seen by the agent's GPU
// telemetry, is a GPU fault like an XID: the slot is quarantined with
// reason "ecc uncorrected <n>", the allocation's user gets the notice,
// and what was charged since the fault is credited. A count already
// non-zero when the agent starts is only the baseline.
func TestECCIncreaseQuarantinesNotifiesAndCredits(t *testing.T) {
	t.Parallel()
	f := startSimFleetOn(t, api.ShapeBaremetal, sim.H100Baremetal8(), func(c *agent.Config) { c.GPUSampleInterval = 50 * time.Millisecond })
	ctx := t.Context()
	evs, err := f.admin.SubscribeEvents(ctx, f.env.Admin.ID)
	if err != nil {
		t.Fatal(err)
	}
	al, err := f.admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	waitAlloc(t, f.admin, al.ID, api.AllocActive)
	gpu := al.Slots[1].GPUPCI
	// The agent has sampled the GPU (count 0: its baseline) before it rises.
	testutil.Eventually(t, "a sample of the GPU's ECC count", func() bool {
		top, err := f.admin.AllocTop(ctx, al.ID)
		return err == nil && len(top.GPUs) == 8 && top.GPUs[1].ECCUncorrected != nil
	})
	f.clock.Advance(time.Hour) // an hour of use
	if _, err := f.env.Server.BillingTick(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.host.SetGPUECC(gpu, 3); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "slot quarantined", func() bool {
		s := f.slotOf(t, gpu)
		return s.Quarantine != nil && s.Quarantine.Reason == "ecc uncorrected 3" && s.AllocationID == al.ID
	})
	deadline := time.After(30 * time.Second)
	for got := false; !got; {
		select {
		case ev := <-evs:
			if ev.Kind == api.EventAllocNotice && ev.Subject == al.ID {
				var n api.AllocNotice
				if err := json.Unmarshal(ev.Data, &n); err != nil || n.Kind != api.NoticeQuarantine || !strings.Contains(n.Message, gpu) ||
					!strings.Contains(n.Message, "ECC") {
					t.Errorf("notice %+v (%v); want a quarantine notice naming %s and ECC", n, err, gpu)
				}
				got = true
			}
		case <-deadline:
			t.Fatal("no alloc.notice event")
		}
	}
	var faultAt time.Time
	var kind string
	var eccCount int64
	if err := f.env.Server.Pool().QueryRow(ctx, `SELECT at, kind, ecc_uncorrected FROM gpu_faults WHERE gpu_pci = $1`, gpu).
		Scan(&faultAt, &kind, &eccCount); err != nil || kind != hostproto.GPUFaultECC || eccCount != 3 {
		t.Fatalf("fault recorded: %s %d, %v; want ecc 3", kind, eccCount, err)
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
	var memo string
	if err := f.env.Server.Pool().QueryRow(ctx, `SELECT amount_minor, memo FROM ledger_entries WHERE reference = $1`,
		billing.FaultCreditReference(al.ID)).Scan(&credit, &memo); err != nil {
		t.Fatalf("no credit: %v", err)
	}
	if credit != since || credit <= 0 || u.StoppedAt == nil || !strings.Contains(memo, "ECC") {
		t.Fatalf("credit %d (%q); want the %d charged since the ECC fault at %s, and the meter stopped (%v)", credit, memo, since, faultAt, u.StoppedAt)
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
	testutil.Eventually(t, "the acknowledged fault to leave the agent's check", func() bool {
		_, faulty := f.agent.GPUFault(gpu)
		return !faulty
	})
	if n := count(t, f.env, `SELECT count(*) FROM gpu_faults`); n != 1 {
		t.Errorf("%d faults recorded; want 1 (a steady count is no new fault)", n)
	}
}

// TestECCCountAtStartIsBaseline: counts already non-zero when hostd
// (re)starts are baselines, not faults; a rise after the start is one.
func TestECCCountAtStartIsBaseline(t *testing.T) {
	t.Parallel()
	fast := func(c *agent.Config) { c.GPUSampleInterval = 50 * time.Millisecond }
	f := startSimFleetOn(t, api.ShapeBaremetal, sim.H100Baremetal8(), fast)
	ctx := context.Background()
	d, err := f.admin.NodeGet(ctx, f.agent.NodeID())
	if err != nil {
		t.Fatal(err)
	}
	f.agent.stop()
	for _, s := range d.Slots {
		if err := f.host.SetGPUECC(s.GPUPCI, 5); err != nil {
			t.Fatal(err)
		}
	}
	f.agent = startAgent(t, f.env, f.host.StateDir, "", hostdtasks.New(hostdtasks.Config{PollInterval: 10 * time.Millisecond}),
		func(c *agent.Config) { c.Env = f.host.Env("", nil); c.Now = f.clock.Now }, fast)
	al, err := f.admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	waitAlloc(t, f.admin, al.ID, api.AllocActive)
	gpu := al.Slots[0].GPUPCI
	testutil.Eventually(t, "a sample of the GPU's count of 5", func() bool {
		top, err := f.admin.AllocTop(ctx, al.ID)
		return err == nil && len(top.GPUs) == 8 && top.GPUs[0].ECCUncorrected != nil && *top.GPUs[0].ECCUncorrected == 5
	})
	if reason, faulty := f.agent.GPUFault(gpu); faulty {
		t.Fatalf("a count of 5 at start is a fault (%s); want the baseline", reason)
	}
	if err := f.host.SetGPUECC(gpu, 6); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "slot quarantined for the rise", func() bool {
		s := f.slotOf(t, gpu)
		return s.Quarantine != nil && s.Quarantine.Reason == "ecc uncorrected 6"
	})
	if n := count(t, f.env, `SELECT count(*) FROM gpu_faults`); n != 1 {
		t.Errorf("%d faults recorded; want 1: the counts at start are no faults", n)
	}
}

// TestECCFaultLostWhileControldDownIsResent: an ECC rise seen while no
// controld answers is kept — the GPU fails the pre-handout check
// meanwhile — and sent again once controld is back, as an XID is.
func TestECCFaultLostWhileControldDownIsResent(t *testing.T) {
	t.Parallel()
	f := startSimFleetOn(t, api.ShapeBaremetal, sim.H100Baremetal8(), func(c *agent.Config) { c.GPUSampleInterval = 50 * time.Millisecond })
	ctx := t.Context()
	d, err := f.admin.NodeGet(ctx, f.agent.NodeID())
	if err != nil {
		t.Fatal(err)
	}
	gpu := d.Slots[4].GPUPCI
	f.env.Restart(t, func() {
		if err := f.host.SetGPUECC(gpu, 1); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "the agent to see the ECC rise", func() bool {
			reason, faulty := f.agent.GPUFault(gpu)
			return faulty && strings.HasPrefix(reason, "ecc uncorrected 1")
		})
	})
	admin := f.env.Client(f.env.AdminToken)
	testutil.Eventually(t, "the resent fault to quarantine the slot", func() bool {
		d, err := admin.NodeGet(ctx, f.agent.NodeID())
		return err == nil && d.Slots[4].Quarantine != nil && d.Slots[4].Quarantine.Reason == "ecc uncorrected 1"
	})
	testutil.Eventually(t, "the acknowledged fault to leave the check", func() bool {
		_, faulty := f.agent.GPUFault(gpu)
		return !faulty
	})
	if n := count(t, f.env, `SELECT count(*) FROM gpu_faults WHERE kind = 'ecc'`); n != 1 {
		t.Errorf("%d ECC faults recorded; want 1", n)
	}
}
