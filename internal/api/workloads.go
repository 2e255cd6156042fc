package api

import "time"

// Workload states (docs/apps.md): pending → pulling → starting → running
// → stopping → stopped | failed.
const (
	WorkloadPending  = "pending"
	WorkloadPulling  = "pulling"
	WorkloadStarting = "starting"
	WorkloadRunning  = "running"
	WorkloadStopping = "stopping"
	WorkloadStopped  = "stopped"
	WorkloadFailed   = "failed"
)

// Container states a node reports for a workload (podman's, narrowed):
// ContainerMissing when the node has no container of it.
const (
	ContainerCreated = "created"
	ContainerRunning = "running"
	ContainerExited  = "exited"
	ContainerMissing = "missing"
)

// Bounds of a readiness probe's start deadline (docs/apps.md,
// "Readiness").
const (
	MinStartDeadline = time.Second
	MaxStartDeadline = time.Hour
)

// WorkloadProbe is a workload's readiness probe: an HTTP GET of HTTPPath
// on Port of the allocation's loopback answering 2xx or 3xx, or (no
// HTTPPath) a TCP connect to it, made by hostd through the allocation's
// environment. Not ready within StartDeadline of its container running,
// the workload fails.
type WorkloadProbe struct {
	Port          int           `json:"port"`
	HTTPPath      string        `json:"http_path,omitempty"`
	StartDeadline time.Duration `json:"start_deadline"`
}
