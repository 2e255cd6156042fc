// Package sim describes the simulated GPU hosts that `gpuaas dev` and the
// tests run: their GPUs with the NVMe namespace and fabric VF that travel
// with each, and the NUMA layout.
package sim

import (
	"fmt"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/internal/api"
)

// SliceHost is an 8-GPU gpu_slice host: 4 GPUs on each of two NUMA nodes,
// each GPU paired with an NVMe namespace and a fabric VF on its NUMA node.
func SliceHost(name, model string) node.Spec {
	s := node.Spec{Name: name, Shape: api.ShapeGPUSlice, GPUModel: model}
	for i := range 8 {
		s.Slots = append(s.Slots, node.SlotSpec{
			GPUPCI:   fmt.Sprintf("0000:%02x:00.0", 0x18+i*0x10),
			NVMe:     fmt.Sprintf("nvme-SIM_%s_%d", name, i),
			FabricVF: fmt.Sprintf("0000:%02x:00.%d", 0xa0+i/4, i%4+1),
			NUMANode: i / 4,
		})
	}
	return s
}

// BaremetalHost is an 8-GPU host rented whole.
func BaremetalHost(name, model string) node.Spec {
	s := SliceHost(name, model)
	s.Shape = api.ShapeBaremetal
	return s
}

// DevFleet is what `gpuaas dev` runs by default: one 8×H200 slice host and
// one 8×H100 bare-metal host.
func DevFleet() []node.Spec {
	return []node.Spec{SliceHost("sim-h200-1", "H200"), BaremetalHost("sim-h100-1", "H100")}
}
