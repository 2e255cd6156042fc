package agent_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/gpumon"
	"github.com/gpuaas/gpuaas/hostd/sim"
	hostdtasks "github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/term"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/obs/obstest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestAllocTopSliceGuestTelemetry: on a slice host whose GPUs are bound to
// vfio-pci (the host's nvidia-smi lists none), hostd reads each running
// VM's GPUs with nvidia-smi inside the guest over SSH and files them under
// the host PCI addresses: alloc.top, the metrics and the heartbeats'
// GPUActive show a load set in the sim. A VM whose nvidia-smi fails makes
// alloc.top of its allocation say so, and so does one whose nvidia-smi
// never answers (after GuestQueryTimeout), while the other VM is still
// read.
func TestAllocTopSliceGuestTelemetry(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	dir := t.TempDir()
	h, err := sim.NewHost(dir, sim.H200Slice8(), "guest1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	ts, err := term.New(term.Config{StateDir: dir, Accounts: h.Users.Accounts(), Hypervisor: h.Hypervisor, Log: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Close() })
	a := startAgent(t, env, dir, enroll(t, admin, "guest1"), hostdtasks.New(hostdtasks.Config{PollInterval: 10 * time.Millisecond}),
		func(c *agent.Config) {
			c.Env = h.Env("", nil)
			c.Terminal = ts // its DialVM is the way into the VMs
			c.MetricsAddr = "127.0.0.1:0"
			c.GPUSampleInterval = 50 * time.Millisecond
			c.GuestQueryTimeout = 2 * time.Second
		})
	readyNode(t, admin, a.NodeID())
	beats := captureSubject(t, env.Bus.Connect(t), hostproto.MsgHeartbeat.SubjectOf(a.NodeID()))
	ctx := context.Background()

	// The host's own nvidia-smi sees none of the GPUs: what follows can
	// only come from inside the guests.
	if _, err := gpumon.Read(ctx, h.Runner, time.Now()); err == nil || !strings.Contains(err.Error(), "No devices were found") {
		t.Fatalf("host nvidia-smi on a slice host: got %v; want no devices", err)
	}

	al1, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	al2, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	al1 = waitAlloc(t, admin, al1.ID, api.AllocActive)
	al2 = waitAlloc(t, admin, al2.ID, api.AllocActive)
	var pcis []string
	for _, s := range al1.Slots {
		pcis = append(pcis, s.GPUPCI)
	}
	slices.Sort(pcis)
	if err := h.SetGPULoad(pcis[1], 70); err != nil {
		t.Fatal(err)
	}
	var top *api.AllocTopResponse
	testutil.Eventually(t, "the loaded slice GPU at 70% in alloc.top", func() bool {
		top, err = admin.AllocTop(ctx, al1.ID)
		return err == nil && len(top.GPUs) == 2 && top.GPUs[1].UtilizationPct != nil && *top.GPUs[1].UtilizationPct == 70
	})
	for i, g := range top.GPUs {
		if g.PCI != pcis[i] || g.Index != i || !strings.HasPrefix(g.UUID, "GPU-") || g.At.IsZero() {
			t.Errorf("GPU %d: got %+v; want pci %s index %d with uuid and time", i, g, pcis[i], i)
		}
	}
	if *top.GPUs[0].UtilizationPct != 0 {
		t.Errorf("idle slice GPU: got util %v; want 0", *top.GPUs[0].UtilizationPct)
	}
	if top.GPUs[0].UUID == top.GPUs[1].UUID {
		t.Errorf("both GPUs have uuid %s", top.GPUs[0].UUID)
	}
	if n := h.Hypervisor.GuestNvidiaSMICalls(al1.ID); n == 0 {
		t.Error("the VM's nvidia-smi was never run")
	}
	url := a.MetricsURL()
	testutil.Eventually(t, "the slice GPU's utilisation in the metrics", func() bool {
		return obstest.Scrape(t, url).Value("gpuaas_gpu_utilization_ratio", "pci", pcis[1]) == 0.7
	})
	testutil.Eventually(t, "the slice GPU active in a heartbeat", func() bool {
		hb, _ := lastBeat(t, beats)
		_, busy := hb.GPUActive[pcis[1]]
		_, idle := hb.GPUActive[pcis[0]]
		return busy && !idle
	})
	testutil.Eventually(t, "the other VM read too", func() bool {
		top2, err := admin.AllocTop(ctx, al2.ID)
		return err == nil && len(top2.GPUs) == 1 && top2.GPUs[0].PCI == al2.Slots[0].GPUPCI
	})

	// al2's nvidia-smi fails: alloc.top of al2 says why; al1 is still read.
	h.Hypervisor.FailGuestNvidiaSMI(al2.ID, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
	var topErr error
	testutil.Eventually(t, "alloc.top of the failing VM to report it", func() bool {
		_, topErr = admin.AllocTop(ctx, al2.ID)
		return topErr != nil && strings.Contains(topErr.Error(), "couldn't communicate")
	})
	if !errors.Is(topErr, api.ErrUnavailable) || !strings.Contains(topErr.Error(), "couldn't communicate with the NVIDIA driver") ||
		!strings.Contains(topErr.Error(), "VM of "+al2.ID) {
		t.Errorf("failing VM: got %v; want unavailable naming %s's VM and nvidia-smi's message", topErr, al2.ID)
	}
	if err := h.SetGPULoad(pcis[0], 30); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the healthy VM still read", func() bool {
		top, err = admin.AllocTop(ctx, al1.ID)
		return err == nil && len(top.GPUs) == 2 && top.GPUs[0].UtilizationPct != nil && *top.GPUs[0].UtilizationPct == 30
	})
	if v := obstest.Scrape(t, url).Value("gpuaas_hostd_guest_gpu_query_failures_total"); v < 1 {
		t.Errorf("gpuaas_hostd_guest_gpu_query_failures_total: got %v; want ≥ 1", v)
	}

	// Once it answers again, so does alloc.top.
	h.Hypervisor.FailGuestNvidiaSMI(al2.ID, "")
	testutil.Eventually(t, "the recovered VM read again", func() bool {
		top2, err := admin.AllocTop(ctx, al2.ID)
		return err == nil && len(top2.GPUs) == 1
	})

	// A guest printing without end (its user is root in it) is cut off,
	// not held: alloc.top of al2 says so, then it recovers.
	h.Hypervisor.FailGuestNvidiaSMI(al2.ID, strings.Repeat("x", 1<<20))
	testutil.Eventually(t, "alloc.top of the flooding VM to report it", func() bool {
		_, topErr = admin.AllocTop(ctx, al2.ID)
		return topErr != nil && strings.Contains(topErr.Error(), "printed more than")
	})
	h.Hypervisor.FailGuestNvidiaSMI(al2.ID, "")
	testutil.Eventually(t, "the VM read again after the flood", func() bool {
		top2, err := admin.AllocTop(ctx, al2.ID)
		return err == nil && len(top2.GPUs) == 1
	})

	// al2's nvidia-smi never answers: after GuestQueryTimeout alloc.top of
	// al2 says so, and al1 is still read meanwhile.
	h.Hypervisor.HangGuestNvidiaSMI(al2.ID, true)
	if err := h.SetGPULoad(pcis[0], 50); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "alloc.top of the hung VM to report it", func() bool {
		_, topErr = admin.AllocTop(ctx, al2.ID)
		return topErr != nil && strings.Contains(topErr.Error(), "no answer")
	})
	if !errors.Is(topErr, api.ErrUnavailable) || !strings.Contains(topErr.Error(), "no answer") {
		t.Errorf("hung VM: got %v; want unavailable saying nvidia-smi gave no answer", topErr)
	}
	testutil.Eventually(t, "the healthy VM read while the other hangs", func() bool {
		top, err = admin.AllocTop(ctx, al1.ID)
		return err == nil && len(top.GPUs) == 2 && top.GPUs[0].UtilizationPct != nil && *top.GPUs[0].UtilizationPct == 50
	})
	h.Hypervisor.HangGuestNvidiaSMI(al2.ID, false)
	testutil.Eventually(t, "the unwedged VM read again", func() bool {
		top2, err := admin.AllocTop(ctx, al2.ID)
		return err == nil && len(top2.GPUs) == 1
	})
}
