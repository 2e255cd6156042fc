package agent

import (
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestActiveHoldsBusyGPUsOnlyWhileReadable: a GPU whose latest sample
// was busy counts as busy at the heartbeat's time; one that went idle
// keeps its last busy sample's time; and while the GPUs cannot be read
// nothing is held, only the last busy samples' times are reported.
func TestActiveHoldsBusyGPUsOnlyWhileReadable(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC)
	util := func(pci string, pct float64, at time.Time) api.GPUSample {
		return api.GPUSample{PCI: pci, UtilizationPct: &pct, At: at}
	}
	var g gpuState
	if got := g.active(t0); got != nil {
		t.Fatalf("no samples: got %v; want nil", got)
	}
	g.record([]api.GPUSample{util("busy", 80, t0), util("quiet", 80, t0)}, 5)
	t1 := t0.Add(time.Second)
	g.record([]api.GPUSample{util("busy", 80, t1), util("quiet", 0, t1)}, 5)
	now := t1.Add(3 * time.Second)
	got := g.active(now)
	if !got["busy"].Equal(now) || !got["quiet"].Equal(t0) || len(got) != 2 {
		t.Errorf("readable: got %v; want busy at %v, quiet at %v", got, now, t0)
	}
	g.mu.Lock()
	g.failing = true
	g.mu.Unlock()
	got = g.active(now.Add(time.Minute))
	if !got["busy"].Equal(t1) || !got["quiet"].Equal(t0) {
		t.Errorf("unreadable: got %v; want busy at its last sample %v, quiet at %v", got, t1, t0)
	}
}
