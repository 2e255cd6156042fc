package sim

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/fsutil"
)

// writeGPUInventory writes the host's GPU UUIDs where hostd's topology
// discovery reads them (tasks.GPUInventoryFile), as an operator records
// them with nvidia-smi before binding the GPUs to vfio-pci: a sim slice
// host's GPUs are on vfio-pci from the start, so its own nvidia-smi
// lists none (gpus.go).
func (r *Runner) writeGPUInventory(stateDir string) error {
	r.mu.Lock()
	gpus := r.gpus
	r.mu.Unlock()
	var b strings.Builder
	for _, g := range gpus {
		fmt.Fprintf(&b, "0000%s, %s\n", strings.ToUpper(g.pci), g.uuid)
	}
	if err := fsutil.WriteFile(filepath.Join(stateDir, tasks.GPUInventoryFile), []byte(b.String()), 0o644, fsutil.Synced); err != nil {
		return fmt.Errorf("sim host: gpu inventory: %w", err)
	}
	return nil
}
