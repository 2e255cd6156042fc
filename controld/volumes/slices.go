package volumes

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// healthSliceVolumes is the part of a node's health (its latest health
// probe, hostd/tasks.HealthReport) that says its slices take volumes.
type healthSliceVolumes struct {
	Probe struct {
		SliceVolumes bool `json:"slice_volumes"`
	} `json:"probe"`
}

// CheckSliceNode refuses a slice with volumes on node nodeID unless the
// node's last health probe said its slices take them: its slices are real
// VMs whose guests mount a volume's disk, and it keeps volumes it can
// lend (docs/decisions/0030-volumes-in-slices.md). A sim node's slices
// (SSH servers on loopback), a node whose slice host is blocked, one that
// has not reported yet, and a hostd that predates volumes in slices, do
// not.
func CheckSliceNode(ctx context.Context, q store.Querier, nodeID string) error {
	d, err := node.Get(ctx, q, nodeID)
	if err != nil {
		return fmt.Errorf("volumes in a slice: %w", err)
	}
	var h healthSliceVolumes
	if len(d.Node.Health) > 0 && json.Unmarshal(d.Node.Health, &h) == nil && h.Probe.SliceVolumes {
		return nil
	}
	return api.Errorf(api.CodeInvalidArgument, "node %s cannot hand a volume to a slice: its last health report does not say its slices are real VMs that take volumes as disks (simulated slices, a blocked slice host, or no report yet)", d.Node.Name).
		WithHint("use a bare-metal SKU on that node's volumes, or a volume on a node whose slices take volumes (`gpuaas node get`)")
}
