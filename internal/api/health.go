package api

import (
	"context"
	"fmt"
	"time"
)

// Health gating (docs/gpu-telemetry.md): quarantined slots, GPU faults that
// hostd reports, and the pre-handout GPU check.

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

// Kinds of GPU fault (GPUFault.FaultKind).
const (
	// GPUFaultXID is an NVIDIA XID error the kernel logged; reports of it
	// leave FaultKind empty.
	GPUFaultXID = "xid"
	// GPUFaultECC is an increase of a GPU's uncorrected volatile ECC
	// count, seen by hostd's GPU telemetry.
	GPUFaultECC = "ecc"
)

// GPUFault is a node's report of a GPU fault: an NVIDIA XID error its
// kernel logged (FaultKind empty or GPUFaultXID), or an increase of the GPU's
// uncorrected ECC count (FaultKind GPUFaultECC). hostd resends it until
// controld acknowledges it; controld acts on each fault (node, GPU,
// kind, XID, At) once.
type GPUFault struct {
	ReportStamp
	NodeID string `json:"node_id"`
	// GPU is the PCI address as the slots know it (0000:3b:00.0).
	GPU string `json:"gpu"`
	// FaultKind is GPUFaultECC for an ECC fault; empty for an XID. (Not
	// "kind": that is the ReportStamp's.)
	FaultKind string `json:"fault_kind,omitempty"`
	// XID is the XID code (XID faults only).
	XID int `json:"xid,omitempty"`
	// ECCUncorrected is the GPU's uncorrected volatile ECC count after
	// the increase (ECC faults only).
	ECCUncorrected uint64 `json:"ecc_uncorrected,omitempty"`
	// Message is the kernel's line, or what hostd saw.
	Message string `json:"message"`
	// At is when the kernel logged it or the sample saw it (hostd's clock).
	At time.Time `json:"at"`
}

// IsECC reports whether f is an ECC fault.
func (f GPUFault) IsECC() bool { return f.FaultKind == GPUFaultECC }

// What names the fault in reasons and messages: "xid 79" or
// "ecc uncorrected 3".
func (f GPUFault) What() string {
	if f.IsECC() {
		return fmt.Sprintf("ecc uncorrected %d", f.ECCUncorrected)
	}
	return fmt.Sprintf("xid %d", f.XID)
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
