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

// WorkloadStartParams are the params of workload.start: make Image
// (REGISTRY/REPOSITORY@sha256:…, never a tag) present in the node's cache
// and the allocation user's container storage, then run it with rootless
// podman as PosixUser (docs/decisions/0021-workloads-on-the-node.md).
type WorkloadStartParams struct {
	WorkloadID   string `json:"workload_id"`
	AllocationID string `json:"allocation_id"`
	PosixUser    string `json:"posix_user"`
	Image        string `json:"image"`
	// Command replaces the image's entrypoint and command when set.
	Command []string `json:"command,omitempty"`
	Env     []string `json:"env,omitempty"` // NAME=value
	// GPUs are the allocation's GPUs on the node (PCI addresses or
	// UUIDs), the container's GPUs; none: every GPU on the node's driver
	// (a bare-metal allocation is the whole node). They reach it through
	// a CDI spec hostd writes for the allocation (docs/apps.md, "GPUs").
	GPUs []string `json:"gpus,omitempty"`
	// LogMaxBytes bounds what is kept of the container's output in LOGS
	// (0: hostd's default).
	LogMaxBytes int64 `json:"log_max_bytes,omitempty"`
	// NoGPUs runs the container without GPU devices (no CDI device is
	// passed; GPUs is then empty and does not mean "every GPU").
	NoGPUs bool `json:"no_gpus,omitempty"`
	// ShmBytes is /dev/shm's size (podman --shm-size; 0: its default).
	ShmBytes int64 `json:"shm_bytes,omitempty"`
	// Mounts are the allocation's volumes bound into the container
	// (workload_mounts.go; hostd/tasks/workload_mounts.go).
	Mounts []WorkloadMount `json:"mounts,omitempty"`
}

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

// WorkloadStopParams are the params of workload.stop: SIGTERM to the
// container's main process, SIGKILL after Grace; Remove also removes the
// container.
type WorkloadStopParams struct {
	WorkloadID   string        `json:"workload_id"`
	AllocationID string        `json:"allocation_id"`
	PosixUser    string        `json:"posix_user"`
	Grace        time.Duration `json:"grace"`
	Remove       bool          `json:"remove,omitempty"`
}

// WorkloadStatusParams are the params of workload.status.
type WorkloadStatusParams struct {
	WorkloadID   string `json:"workload_id"`
	AllocationID string `json:"allocation_id"`
	PosixUser    string `json:"posix_user"`
	// Lines is how many of the last log lines to report; 0 is 20.
	Lines int `json:"lines,omitempty"`
	// Wait is how long to wait for a running container to end before
	// reporting that it runs (a long poll, as job.wait's).
	Wait time.Duration `json:"wait,omitempty"`
	// Probe, when set, is probed while the container runs, until it
	// passes or the wait is over; the report says Ready or why not.
	Probe *WorkloadProbe `json:"probe,omitempty"`
}

// WorkloadReport is what the workload tasks report: the container's state
// on the node (ContainerRunning, ContainerExited, ...), its exit code once
// exited, and its last log lines. Pulled says whether this start fetched
// the image from the registry (false: the node's cache had it).
type WorkloadReport struct {
	WorkloadID  string     `json:"workload_id"`
	Container   string     `json:"container"`
	State       string     `json:"state"`
	ExitCode    int        `json:"exit_code"`
	OOMKilled   bool       `json:"oom_killed,omitempty"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	Pulled      bool       `json:"pulled,omitempty"`
	LastLines   []string   `json:"last_lines,omitempty"`
	Reason      string     `json:"reason,omitempty"`
	ImageConfig string     `json:"image_config,omitempty"`
	// Devices are the CDI devices (KIND=NAME) the container was run with:
	// its GPUs.
	Devices []string `json:"devices,omitempty"`
	// Ready: the status's probe passed; ProbeError is its last error
	// when it did not.
	Ready      bool   `json:"ready,omitempty"`
	ProbeError string `json:"probe_error,omitempty"`
}

// Failed reports whether the container ended with a non-zero exit code.
func (r WorkloadReport) Failed() bool { return r.State == ContainerExited && r.ExitCode != 0 }
