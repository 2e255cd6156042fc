package sim

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

type noProgress struct{}

func (noProgress) Progress(string, string, time.Duration, string) {}

// discover runs hostd's slice.topology_discover on h.
func discover(t *testing.T, h *Host, shape string) api.TopologyResult {
	t.Helper()
	params, err := json.Marshal(hostproto.TopologyDiscoverParams{Shape: shape})
	if err != nil {
		t.Fatal(err)
	}
	res, err := tasks.New(tasks.Config{})[api.TaskTopologyDiscover](context.Background(), h.Env("n-1", nil), params, noProgress{})
	if err != nil {
		t.Fatal(err)
	}
	return res.(api.TopologyResult)
}

// TestDiscoveryGPUUUIDs: topology discovery gives each candidate slot its
// GPU's UUID. On a slice host (GPUs on vfio-pci, which the host's
// nvidia-smi cannot see) they come from the inventory file the sim
// writes as an operator would; they are the UUIDs a guest given those
// GPUs lists. On a bare-metal host the host's nvidia-smi answers, and
// discovery writes what it learned back to the inventory.
func TestDiscoveryGPUUUIDs(t *testing.T) {
	h, err := NewHost(t.TempDir(), H200Slice8(), "sim-h200-1")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r := discover(t, h, api.ShapeGPUSlice)
	if len(r.CandidateSlots) == 0 {
		t.Fatalf("no candidate slots: %+v", r.Blockers)
	}
	seen := map[string]bool{}
	for _, c := range r.CandidateSlots {
		if !strings.HasPrefix(c.GPUUUID, "GPU-") || seen[c.GPUUUID] {
			t.Errorf("slot %s: UUID %q; want a GPU- UUID of its own", c.GPUPCI, c.GPUUUID)
		}
		seen[c.GPUUUID] = true
		rows, _, _ := h.Runner.guestRows([]host.PCIAddress{host.PCIAddress(c.GPUPCI)})
		if len(rows) != 1 || rows[0].gpu.uuid != c.GPUUUID {
			t.Errorf("slot %s: UUID %q; a guest given the GPU lists %+v", c.GPUPCI, c.GPUUUID, rows)
		}
	}

	bm, err := NewHost(t.TempDir(), H100Baremetal8(), "sim-h100-1")
	if err != nil {
		t.Fatal(err)
	}
	defer bm.Close()
	inv := filepath.Join(bm.StateDir, tasks.GPUInventoryFile)
	want, err := os.ReadFile(inv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(inv); err != nil {
		t.Fatal(err)
	}
	r = discover(t, bm, api.ShapeBaremetal)
	got, err := os.ReadFile(inv)
	if err != nil {
		t.Fatalf("discovery did not write back what nvidia-smi listed: %v", err)
	}
	if string(got) != string(want) {
		t.Errorf("inventory written back:\n%s\nwant:\n%s", got, want)
	}
	parsed := tasks.ParseGPUInventory(got)
	for _, c := range r.CandidateSlots {
		if c.GPUUUID == "" || parsed[c.GPUPCI] != c.GPUUUID {
			t.Errorf("bare-metal slot %s: UUID %q; the host's nvidia-smi says %q", c.GPUPCI, c.GPUUUID, parsed[c.GPUPCI])
		}
	}
	if len(r.CandidateSlots) == 0 {
		t.Errorf("no bare-metal candidate slots: %+v", r.Blockers)
	}
}
