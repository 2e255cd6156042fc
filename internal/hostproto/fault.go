package hostproto

import (
	"fmt"
	"time"
)

// HostFault is the kind of node report that carries a GPU fault (a
// GPUFault), next to heartbeats: gpuaas.ctl.host.<node>.fault.
const HostFault = "fault"

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
