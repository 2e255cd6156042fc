package tasks

import (
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gpuaas/gpuaas/hostd/guestimage"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestDriverCheckMeta: the seed always says how many GPUs the guest must
// list; the UUIDs for the test image's simulated nvidia-smi are seeded
// only on a node without passthrough, and only those the inventory knows.
func TestDriverCheckMeta(t *testing.T) {
	p := hostproto.VMProvisionParams{Slots: []api.Slot{{GPUUUID: "GPU-a"}, {GPUUUID: "GPU-b"}, {}}}
	for _, sim := range []bool{false, true} {
		b, err := driverCheckMeta(p, sim)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m[guestimage.MetaGPUs] != 3 {
			t.Errorf("sim=%v: %s = %v; want 3", sim, guestimage.MetaGPUs, m[guestimage.MetaGPUs])
		}
		got, seeded := m[guestimage.MetaSimGPUUUIDs]
		if seeded != sim || sim && got != "GPU-a GPU-b" {
			t.Errorf("sim=%v: %s = %v (present %v)", sim, guestimage.MetaSimGPUUUIDs, got, seeded)
		}
	}
}

// TestParseDriverMarker: the ready marker's verdict line and its "uuid: "
// lines; other lines are not UUIDs.
func TestParseDriverMarker(t *testing.T) {
	c := parseDriverMarker("ok: 2 GPUs (instance a)\nuuid: GPU-SIM-1\nnoise GPU-x\nuuid: GPU-2\n")
	if !c.Passed || c.Message != "ok: 2 GPUs (instance a)" || !slices.Equal(c.UUIDs, []string{"GPU-SIM-1", "GPU-2"}) {
		t.Errorf("got %+v", c)
	}
	if got := parseSMIList("GPU 0: NVIDIA H200 (UUID: GPU-a)\nGPU 1: NVIDIA H200 (UUID: GPU-b)\n  MIG 1g.10gb Device 0: (UUID: MIG-c)\n"); !slices.Equal(got, []string{"GPU-a", "GPU-b"}) {
		t.Errorf("parseSMIList = %v", got)
	}
	if strings.Contains(guestimage.SimUUIDPrefix, " ") || guestimage.SimUUIDPrefix != api.SimGPUUUIDPrefix {
		t.Errorf("the image's simulated prefix %q is not api's %q", guestimage.SimUUIDPrefix, api.SimGPUUUIDPrefix)
	}
}
