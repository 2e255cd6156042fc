package tasks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/fsutil"
)

// The node's GPU inventory: each GPU's UUID by PCI address, which the
// driver check compares a slice guest's `nvidia-smi -L` with (controld's
// alloc/drivercheck.go; docs/slices.md, "Driver check").
//
// Where UUIDs come from: NVIDIA's driver is the only reliable source.
// sysfs has no GPU UUID (it is the board's, read by the driver), and a
// slice host's GPUs are bound to vfio-pci, where nvidia-smi cannot see
// them. So discovery asks nvidia-smi for the GPUs it sees and keeps what
// it learns in GPUInventoryFile, which then answers for GPUs since bound
// to vfio-pci. The file is nvidia-smi's own output, so an operator whose
// GPUs were bound before hostd ever ran records it with one command,
// while the nvidia driver still has them (docs/slices.md):
//
//	nvidia-smi --query-gpu=pci.bus_id,uuid --format=csv,noheader,nounits >/var/lib/gpuaas/gpu-uuids.csv
//
// The sim writes the file for its profile's GPUs (hostd/sim), standing
// for the operator.

// GPUInventoryFile is the inventory's name in hostd's state directory.
const GPUInventoryFile = "gpu-uuids.csv"

// uuidQuery is the nvidia-smi query whose output GPUInventoryFile holds.
var uuidQuery = []string{"--query-gpu=pci.bus_id,uuid", "--format=csv,noheader,nounits"}

// ParseGPUInventory reads nvidia-smi's "bus id, uuid" lines into UUIDs by
// PCI address in sysfs form (0000:18:00.0). Lines that are not such a
// pair are skipped.
func ParseGPUInventory(b []byte) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		bus, uuid, ok := strings.Cut(line, ",")
		bus, uuid = strings.ToLower(strings.TrimSpace(bus)), strings.TrimSpace(uuid)
		if !ok || !strings.HasPrefix(uuid, "GPU-") || len(bus) < len("0000:00:00.0") {
			continue
		}
		// nvidia-smi writes an 8-digit domain (00000000:18:00.0).
		out[bus[len(bus)-len("0000:00:00.0"):]] = uuid
	}
	return out
}

// formatGPUInventory writes inv as nvidia-smi does, sorted by address.
func formatGPUInventory(inv map[string]string) []byte {
	var b bytes.Buffer
	for _, pci := range slices.Sorted(maps.Keys(inv)) {
		fmt.Fprintf(&b, "0000%s, %s\n", strings.ToUpper(pci), inv[pci])
	}
	return b.Bytes()
}

// gpuInventory is the node's inventory: the file's, updated with what the
// host's nvidia-smi lists now (written back when it learned something).
// nvidia-smi missing or listing nothing is not an error: the GPUs may
// all be on vfio-pci.
func gpuInventory(ctx context.Context, env *Env) (map[string]string, error) {
	path := filepath.Join(env.StateDir, GPUInventoryFile)
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("gpu inventory: %w", err)
	}
	inv := ParseGPUInventory(b)
	if env.Runner == nil {
		return inv, nil
	}
	out, err := env.Runner.Run(ctx, "nvidia-smi", uuidQuery...)
	if err != nil {
		return inv, nil //nolint:nilerr // no driver, or no GPU on it
	}
	changed := false
	for pci, uuid := range ParseGPUInventory(out) {
		if inv[pci] != uuid {
			inv[pci], changed = uuid, true
		}
	}
	if changed {
		if err := fsutil.WriteFile(path, formatGPUInventory(inv), 0o644, fsutil.Synced); err != nil {
			return nil, fmt.Errorf("gpu inventory: %w", err)
		}
	}
	return inv, nil
}

// addGPUUUIDs sets each candidate slot's GPU UUID from the inventory.
func addGPUUUIDs(ctx context.Context, env *Env, r *api.TopologyResult) error {
	inv, err := gpuInventory(ctx, env)
	if err != nil {
		return err
	}
	for i := range r.CandidateSlots {
		r.CandidateSlots[i].GPUUUID = inv[r.CandidateSlots[i].GPUPCI]
	}
	return nil
}
