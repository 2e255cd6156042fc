package api

import (
	"context"
	"time"
)

// Health gating (docs/gpu-telemetry.md): quarantined slots, GPU faults that
// hostd reports, and the pre-handout GPU check.

// SlotQuarantine is why a slot is kept out of placement.
type SlotQuarantine struct {
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
	// By is the operator's user id, or "system:health" for a GPU fault.
	By string `json:"by"`
}

// NodeQuarantineRequest quarantines one slot of a node, named by its index
// (Slot) or its GPU's PCI address (GPU): exactly one of them.
type NodeQuarantineRequest struct {
	Node   string `json:"node"`
	Slot   *int   `json:"slot,omitempty"`
	GPU    string `json:"gpu,omitempty"`
	Reason string `json:"reason"`
}

// NodeClearRequest clears the quarantine of one slot of a node (Slot or
// GPU), or of every quarantined slot of it (neither).
type NodeClearRequest struct {
	Node string `json:"node"`
	Slot *int   `json:"slot,omitempty"`
	GPU  string `json:"gpu,omitempty"`
}

// PhaseGPUCheck is the first phase of a provision task: the pre-handout
// check of the GPUs about to be handed out.
const PhaseGPUCheck = "gpu_check"

// GPUCheckFailed is the Reason prefix of a provision task that failed its
// pre-handout GPU check; FailedGPUs of the task's result name the GPUs.
const GPUCheckFailed = "gpu check failed"

// GPUCheckResult is the result body of a task that failed its
// pre-handout GPU check (phase PhaseGPUCheck): the GPUs that failed it,
// and why.
type GPUCheckResult struct {
	FailedGPUs []string `json:"failed_gpus"`
	Reason     string   `json:"reason"`
}

// NodeQuarantine quarantines a slot (operators).
func (c *Client) NodeQuarantine(ctx context.Context, req NodeQuarantineRequest, opts ...CallOption) (*NodeDetail, error) {
	return Do(ctx, c, OpNodeQuarantine, req, opts...)
}

// NodeClear clears slot quarantines (operators).
func (c *Client) NodeClear(ctx context.Context, req NodeClearRequest, opts ...CallOption) (*NodeDetail, error) {
	return Do(ctx, c, OpNodeClear, req, opts...)
}
