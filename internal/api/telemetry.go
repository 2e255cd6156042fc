package api

import (
	"context"
	"time"
)

// GPUSample is one GPU's telemetry as hostd last read it (nvidia-smi). A
// metric the GPU does not report ([N/A], [Not Supported]) is absent.
type GPUSample struct {
	// Index is nvidia-smi's index on the host; in an AllocTopResponse it
	// is the GPU's position in the allocation (ordered by PCI address, as
	// nvidia-smi numbers them inside the allocation).
	Index int    `json:"index"`
	PCI   string `json:"pci"` // sysfs form: "0000:3b:00.0"
	UUID  string `json:"uuid"`
	// UtilizationPct is the percent of the last sample period in which a
	// kernel ran (0–100).
	UtilizationPct   *float64 `json:"utilization_pct,omitempty"`
	MemoryUsedBytes  *uint64  `json:"memory_used_bytes,omitempty"`
	MemoryTotalBytes *uint64  `json:"memory_total_bytes,omitempty"`
	TemperatureC     *float64 `json:"temperature_c,omitempty"`
	PowerW           *float64 `json:"power_w,omitempty"`
	// ECCUncorrected counts uncorrected volatile ECC errors since the
	// driver loaded.
	ECCUncorrected *uint64   `json:"ecc_uncorrected,omitempty"`
	At             time.Time `json:"at"`
}

// AllocTopResponse is an allocation's GPU telemetry.
type AllocTopResponse struct {
	AllocationID string      `json:"allocation_id"`
	GPUs         []GPUSample `json:"gpus"`
}

// AllocTop returns the latest telemetry of an allocation's GPUs.
func (c *Client) AllocTop(ctx context.Context, id string) (*AllocTopResponse, error) {
	return Do(ctx, c, OpAllocTop, AllocRef{ID: id})
}
