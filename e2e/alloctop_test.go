package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestAllocTopInDev is the acceptance of GPU telemetry (docs/gpu-telemetry.md):
// through `gpuaas dev` and the built binary, `gpuaas alloc top ID --json
// --count 1` prints one metrics line per GPU of the allocation, and a load
// written into the sim host's knob file (as docs/gpu-telemetry.md tells) shows up.
func TestAllocTopInDev(t *testing.T) {
	dev, _ := loggedInDev(t)
	data := dev.dataDir
	r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h200-slice", "--gpus", "2", "--json")
	var a api.Allocation
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil || r.code != 0 {
		t.Fatalf("alloc create: exit %d, %v: %q %s", r.code, err, r.stdout, r.stderr)
	}
	if r := dev.gpuaas(t, "", "alloc", "wait", a.ID, "--for", "active", "--timeout", "2m"); r.code != 0 {
		t.Fatalf("alloc wait: exit %d %s", r.code, r.stderr)
	}
	pcis := map[string]bool{}
	for _, s := range a.Slots {
		pcis[s.GPUPCI] = true
	}
	busy := a.Slots[0].GPUPCI
	// The dev fleet's slice host is sim-slice-1; its knobs are under its
	// state directory.
	knob := filepath.Join(data, "hosts", "sim-slice-1", "sim", "gpus", busy+".load")
	if err := os.WriteFile(knob, []byte("70\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	var rows []map[string]any
	testutil.EventuallyWithin(t, time.Minute, "alloc top to show the load", func() bool {
		r := dev.gpuaas(t, "", "alloc", "top", a.ID, "--json", "--count", "1")
		if r.code != 0 && strings.Contains(r.stderr, "no GPU telemetry") {
			return false // the slice's VM not read yet: its GPUs are read from inside it
		}
		if r.code != 0 {
			t.Fatalf("alloc top: exit %d %s", r.code, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != len(a.Slots) {
			t.Fatalf("alloc top --json --count 1 printed %d lines; want %d (one per GPU):\n%s", len(lines), len(a.Slots), r.stdout)
		}
		rows = rows[:0]
		for _, line := range lines {
			var row map[string]any
			if err := json.Unmarshal([]byte(line), &row); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			if row["allocation_id"] != a.ID || !pcis[row["pci"].(string)] || row["memory_total_bytes"] == nil {
				t.Fatalf("row %v; want allocation %s and one of its GPUs %v", row, a.ID, pcis)
			}
			rows = append(rows, row)
		}
		for _, row := range rows {
			if row["pci"] == busy && row["utilization_pct"] == 70.0 {
				return true
			}
		}
		return false
	})

	if r := dev.gpuaas(t, "", "alloc", "release", a.ID); r.code != 0 {
		t.Fatalf("release: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "alloc", "wait", a.ID, "--for", "released", "--timeout", "2m"); r.code != 0 {
		t.Fatalf("wait released: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "alloc", "top", a.ID, "--count", "1"); r.code == 0 || !strings.Contains(r.stderr, "released") {
		t.Errorf("alloc top of a released allocation: exit %d, stderr %q; want an error saying released", r.code, r.stderr)
	}
}
