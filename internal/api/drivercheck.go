package api

import "strings"

// DriverCheck is a slice guest's driver check as hostd read it from the
// guest's readiness marker (docs/slices.md, "Driver check"): the guest
// ran `nvidia-smi -L` and listed these GPUs. controld makes the
// allocation active only when they are the slots' GPUs.
type DriverCheck struct {
	// Passed is the guest's own verdict (the ready marker, not the
	// failed one).
	Passed bool `json:"passed"`
	// Message is the verdict's line: "ok: 1 GPUs (instance a-...)".
	Message string `json:"message,omitempty"`
	// UUIDs are the GPUs nvidia-smi -L listed, in its order.
	UUIDs []string `json:"uuids,omitempty"`
}

// SimGPUUUIDPrefix starts the UUIDs the test guest image's simulated
// nvidia-smi prints: "GPU-SIM-" followed by the slot's UUID without its
// "GPU-". Only a test node's slices may report them.
const SimGPUUUIDPrefix = "GPU-SIM-"

// SimGPUUUID is the simulated form of a GPU UUID.
func SimGPUUUID(uuid string) string {
	return SimGPUUUIDPrefix + strings.TrimPrefix(uuid, "GPU-")
}

// IsSimGPUUUID reports whether uuid is a simulated one.
func IsSimGPUUUID(uuid string) bool { return strings.HasPrefix(uuid, SimGPUUUIDPrefix) }
