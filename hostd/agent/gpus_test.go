package agent_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/obs/obstest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// countMsg counts the records of msg in the ring.
func countMsg(ring *agent.LogRing, msg string) int {
	n := 0
	for _, r := range ring.Query(0, time.Time{}, 0) {
		if r.Msg == msg {
			n++
		}
	}
	return n
}

// lastBeat decodes the newest captured heartbeat.
func lastBeat(t *testing.T, c *capture) (hostproto.Heartbeat, int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var hb hostproto.Heartbeat
	if len(c.msgs) == 0 || !opened(c.msgs[len(c.msgs)-1], &hb) {
		return hostproto.Heartbeat{}, len(c.msgs)
	}
	return hb, len(c.msgs)
}

// TestGPUTelemetry: the agent samples the sim's nvidia-smi, exports each
// GPU's metrics labelled by pci and uuid, and reports in its heartbeats
// when each GPU was last busy: only once its load crosses the threshold,
// and no later once the load drops. A failing nvidia-smi is counted and
// logged once per outage, and the agent carries on.
func TestGPUTelemetry(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	// GPUs on nvidia: the host's own nvidia-smi sees them (on vfio-pci
	// they are the guests' to report, TestAllocTopSliceGuestTelemetry).
	h, err := sim.NewHost(t.TempDir(), sim.H200Slice8().BindGPUs("nvidia"), "gpu1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	ring := agent.NewLogRing(0, 0)
	a := startAgent(t, env, t.TempDir(), enroll(t, admin, "gpu1"), newFakeHost().registry(), func(c *agent.Config) {
		c.Env = &tasks.Env{Runner: h.Runner}
		c.MetricsAddr = "127.0.0.1:0"
		c.GPUSampleInterval = 50 * time.Millisecond
		c.GPUActiveThreshold = 10
		c.LogRing = ring
		c.Log = slog.New(ring.Handler(c.Log.Handler()))
	})
	beats := captureSubject(t, env.Bus.Connect(t), hostproto.MsgHeartbeat.SubjectOf(a.NodeID()))
	url := a.MetricsURL()
	busy, idle := h.Profile.GPUs[3].PCI, h.Profile.GPUs[0].PCI

	var uuid string
	testutil.Eventually(t, "idle GPU metrics", func() bool {
		m := obstest.Scrape(t, url)
		s := m.Series("gpuaas_gpu_power_watts", "pci", idle)
		if s == nil {
			return false
		}
		for _, l := range s.GetLabel() {
			if l.GetName() == "uuid" {
				uuid = l.GetValue()
			}
		}
		return true
	})
	m := obstest.Scrape(t, url)
	for _, tt := range []struct {
		name string
		want float64
	}{
		{"gpuaas_gpu_utilization_ratio", 0},
		{"gpuaas_gpu_power_watts", 60},
		{"gpuaas_gpu_temperature_celsius", 35},
		{"gpuaas_gpu_memory_used_bytes", 0},
		{"gpuaas_gpu_memory_total_bytes", 143771 << 20},
		{"gpuaas_gpu_ecc_uncorrected_total", 0},
	} {
		if got := m.Value(tt.name, "pci", idle, "uuid", uuid); got != tt.want {
			t.Errorf("%s{pci=%s}: got %v; want %v", tt.name, idle, got, tt.want)
		}
	}
	if n := len(m["gpuaas_gpu_utilization_ratio"].GetMetric()); n != 8 {
		t.Errorf("utilization series: got %d; want 8", n)
	}
	testutil.Eventually(t, "a heartbeat", func() bool { _, n := lastBeat(t, beats); return n > 0 })
	if hb, _ := lastBeat(t, beats); len(hb.GPUActive) != 0 {
		t.Errorf("idle host: heartbeat GPUActive %v; want none", hb.GPUActive)
	}

	// Below the threshold is not activity; at it, it is.
	if err := h.SetGPULoad(busy, 9); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "util 0.09", func() bool {
		return obstest.Scrape(t, url).Value("gpuaas_gpu_utilization_ratio", "pci", busy) == 0.09
	})
	_, n0 := lastBeat(t, beats)
	testutil.Eventually(t, "a later heartbeat", func() bool { _, n := lastBeat(t, beats); return n > n0+1 })
	if hb, _ := lastBeat(t, beats); len(hb.GPUActive) != 0 {
		t.Errorf("GPU at 9%% (threshold 10): heartbeat GPUActive %v; want none", hb.GPUActive)
	}
	if err := h.SetGPULoad(busy, 80); err != nil {
		t.Fatal(err)
	}
	if err := h.SetGPUECC(busy, 2); err != nil {
		t.Fatal(err)
	}
	var activeAt time.Time
	testutil.Eventually(t, "GPUActive for the busy GPU", func() bool {
		hb, _ := lastBeat(t, beats)
		activeAt = hb.GPUActive[busy]
		return !activeAt.IsZero()
	})
	if hb, _ := lastBeat(t, beats); len(hb.GPUActive) != 1 {
		t.Errorf("GPUActive %v; want only %s", hb.GPUActive, busy)
	}
	m = obstest.Scrape(t, url)
	if got := m.Value("gpuaas_gpu_utilization_ratio", "pci", busy); got != 0.8 {
		t.Errorf("busy utilization: got %v; want 0.8", got)
	}
	if got := m.Value("gpuaas_gpu_ecc_uncorrected_total", "pci", busy); got != 2 {
		t.Errorf("busy ECC: got %v; want 2", got)
	}
	if got := m.Value("gpuaas_gpu_power_watts", "pci", busy); got < 500 {
		t.Errorf("busy power: got %v; want > 500", got)
	}
	testutil.Eventually(t, "GPUActive moving while busy", func() bool {
		hb, _ := lastBeat(t, beats)
		return hb.GPUActive[busy].After(activeAt)
	})

	// Idle again: the last busy time stays where it was.
	if err := h.SetGPULoad(busy, 0); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "util 0", func() bool {
		return obstest.Scrape(t, url).Value("gpuaas_gpu_utilization_ratio", "pci", busy) == 0
	})
	_, n0 = lastBeat(t, beats)
	testutil.Eventually(t, "a heartbeat after the idle sample", func() bool { _, n := lastBeat(t, beats); return n > n0+1 })
	hb, n1 := lastBeat(t, beats)
	last := hb.GPUActive[busy]
	testutil.Eventually(t, "two more heartbeats", func() bool { _, n := lastBeat(t, beats); return n > n1+2 })
	if hb, _ := lastBeat(t, beats); !hb.GPUActive[busy].Equal(last) || last.IsZero() {
		t.Errorf("idle again: GPUActive moved from %v to %v; want it to stay", last, hb.GPUActive[busy])
	}

	// An outage: counted, logged once, survived; then logged as over.
	h.Runner.FailCommand("nvidia-smi", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
	testutil.Eventually(t, "3 failed queries", func() bool {
		return obstest.Scrape(t, url).Value("gpuaas_hostd_gpu_query_failures_total") >= 3
	})
	if got := countMsg(ring, "GPU telemetry unavailable"); got != 1 {
		t.Errorf("outage logged %d times; want once", got)
	}
	h.Runner.ClearFailures()
	testutil.Eventually(t, "recovery logged", func() bool { return countMsg(ring, "GPU telemetry available again") == 1 })
	if got := obstest.Scrape(t, url).Value("gpuaas_gpu_power_watts", "pci", idle); got != 60 {
		t.Errorf("after the outage, power: got %v; want 60", got)
	}
}
