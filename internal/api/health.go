package api

import (
	"context"
	"time"
)

// Health gating (issue 16, item 4): quarantined slots, GPU faults that
// hostd reports, and the pre-handout GPU check.

// Endpoints of slot quarantine (operators).
const (
	EndpointNodeQuarantine = "node.quarantine"
	EndpointNodeClear      = "node.clear"
)

// HostFault is the kind of node report that carries a GPU fault (a
// GPUFault), next to heartbeats: gpuaas.ctl.host.<node>.fault.
const HostFault = "fault"

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

// GPUFault is a node's report of a GPU fault: an NVIDIA XID error its
// kernel logged. hostd resends it until controld acknowledges it;
// controld acts on each fault (node, GPU, XID, At) once.
type GPUFault struct {
	ReportStamp
	NodeID string `json:"node_id"`
	// GPU is the PCI address as the slots know it (0000:3b:00.0).
	GPU string `json:"gpu"`
	XID int    `json:"xid"`
	// Message is the kernel's line.
	Message string `json:"message"`
	// At is when the kernel logged it (hostd's clock).
	At time.Time `json:"at"`
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
	var out NodeDetail
	return &out, c.Mutate(ctx, EndpointNodeQuarantine, req, &out, opts...)
}

// NodeClear clears slot quarantines (operators).
func (c *Client) NodeClear(ctx context.Context, req NodeClearRequest, opts ...CallOption) (*NodeDetail, error) {
	var out NodeDetail
	return &out, c.Mutate(ctx, EndpointNodeClear, req, &out, opts...)
}
