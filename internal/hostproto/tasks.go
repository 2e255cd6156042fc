package hostproto

import (
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TopologyDiscoverParams are the params of a slice.topology_discover task.
type TopologyDiscoverParams struct {
	// Shape is what the node is rented as: ShapeGPUSlice or ShapeBaremetal.
	Shape string `json:"shape"`
	// Subnet is the IPv4 network slot addresses are drawn from; empty means
	// DefaultSlotSubnet.
	Subnet string `json:"subnet,omitempty"`
}

// VMProvisionParams are the params of slice.vm_provision.
type VMProvisionParams struct {
	AllocationID string      `json:"allocation_id"`
	UserID       string      `json:"user_id"`
	PosixUser    string      `json:"posix_user"`
	Slots        []api.Slot  `json:"slots"`
	VCPUs        int         `json:"vcpus"`
	MemoryMiB    int         `json:"memory_mib"`
	Image        api.VMImage `json:"image"`
	SSHKeys      []string    `json:"ssh_keys,omitempty"`
	// Volumes are handed to the VM as disks, which its guest mounts at
	// their paths (docs/decisions/0030-volumes-in-slices.md).
	Volumes []api.VolumeAttachment `json:"volumes,omitempty"`
}

// VMProvisionResult is what slice.vm_provision reports.
type VMProvisionResult struct {
	Domain  string `json:"domain"`
	Address string `json:"address"` // host:port of the VM's sshd
	// DriverCheck is what the guest's driver check found; controld fails
	// the allocation when it is absent (fail closed).
	DriverCheck *api.DriverCheck `json:"driver_check,omitempty"`
}

// VMReleaseParams are the params of slice.vm_release. Cleanup marks the
// release that follows a failed provisioning: every step tolerates what
// was never created.
type VMReleaseParams struct {
	AllocationID    string        `json:"allocation_id"`
	Slots           []api.Slot    `json:"slots"`
	Wipe            bool          `json:"wipe,omitempty"`
	Cleanup         bool          `json:"cleanup,omitempty"`
	ShutdownTimeout time.Duration `json:"shutdown_timeout,omitempty"`
}

// UserProvisionParams are the params of allocation.provision_user (bare
// metal).
type UserProvisionParams struct {
	AllocationID string   `json:"allocation_id"`
	UserID       string   `json:"user_id"`
	PosixUser    string   `json:"posix_user"`
	SSHKeys      []string `json:"ssh_keys,omitempty"`
	// Volumes are mounted for the user (volumes.go).
	Volumes []api.VolumeAttachment `json:"volumes,omitempty"`
}

// UserDeprovisionParams are the params of allocation.deprovision_user.
type UserDeprovisionParams struct {
	AllocationID string `json:"allocation_id"`
	PosixUser    string `json:"posix_user"`
	Cleanup      bool   `json:"cleanup,omitempty"`
}

// UserDeprovisionResult is what allocation.deprovision_user reports.
type UserDeprovisionResult struct {
	PosixUser string `json:"posix_user"`
	// Existed is set when the user was found at all.
	Existed bool `json:"existed,omitempty"`
	// Removed counts what the release removed of the user besides its
	// account and home (docs/operators.md, "Tenant isolation"); absent
	// from hostds that predate it, and when the user was not found.
	Removed *api.UserRemoved `json:"removed,omitempty"`
}

// JobStartParams are the params of job.start: run Setup then Run as the
// allocation's user through its environment (hostd/env), and report
// within Wait whether it ended.
type JobStartParams struct {
	JobID        string        `json:"job_id"`
	AllocationID string        `json:"allocation_id"`
	PosixUser    string        `json:"posix_user"`
	Setup        string        `json:"setup,omitempty"`
	Run          string        `json:"run"`
	Env          []string      `json:"env,omitempty"` // NAME=value
	Timeout      time.Duration `json:"timeout,omitempty"`
	Wait         time.Duration `json:"wait"`
	// LogMaxBytes bounds the job's log kept in JetStream (0: hostd's
	// default); past it a marker line says the log was cut.
	LogMaxBytes int64 `json:"log_max_bytes,omitempty"`

	// SealedEnv is more of Env (a JSON list of NAME=value) sealed to the
	// node's key (internal/nodeseal): the job's secret values, which only
	// this node's hostd can open.
	SealedEnv []byte `json:"sealed_env,omitempty"`
	// Workdir is where setup and run start (JobCreateRequest.Workdir); a
	// job whose workdir is not a directory on the node fails at phase
	// JobPhaseWorkdir before anything runs.
	Workdir string `json:"workdir,omitempty"`
	// Image is the digest reference (REPO@sha256:…) of the image whose
	// container setup and run run in, as the renter (rootless podman);
	// empty: in the allocation's own environment. GPUs are the
	// allocation's GPUs that container gets (WorkloadStartParams.GPUs).
	Image string   `json:"image,omitempty"`
	GPUs  []string `json:"gpus,omitempty"`

	// Attempt is the job's attempt (1 when 0); from the second, hostd
	// numbers its log lines from LogNext (the line after the last one
	// the lost attempt published) and writes first a marker line
	// "--- attempt N (AttemptReason) ---".
	Attempt       int    `json:"attempt,omitempty"`
	AttemptReason string `json:"attempt_reason,omitempty"`
	LogNext       int64  `json:"log_next,omitempty"`
}

// JobWaitParams are the params of job.wait: report within Wait whether
// the job ended.
type JobWaitParams struct {
	JobID string        `json:"job_id"`
	Wait  time.Duration `json:"wait"`
}

// JobStopParams are the params of job.stop: SIGTERM to the job's
// process group, SIGKILL after Grace.
type JobStopParams struct {
	JobID string        `json:"job_id"`
	Grace time.Duration `json:"grace"`
}

// JobReport is what job.start and job.wait report: the job still runs
// (Ended false), or how it ended. Unknown is set when hostd does not know
// the job (it restarted since starting it): the job is lost.
type JobReport struct {
	JobID     string     `json:"job_id"`
	Ended     bool       `json:"ended"`
	Unknown   bool       `json:"unknown,omitempty"`
	Phase     string     `json:"phase,omitempty"`
	ExitCode  int        `json:"exit_code"`
	Signal    string     `json:"signal,omitempty"`
	TimedOut  bool       `json:"timed_out,omitempty"`
	Cancelled bool       `json:"cancelled,omitempty"`
	Reason    string     `json:"reason,omitempty"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Output is the end of the job's output (stdout and stderr as
	// written, at most 16 KiB, as UTF-8) in a final report; OutputBytes
	// counts all of it.
	Output      string `json:"output,omitempty"`
	OutputBytes int64  `json:"output_bytes,omitempty"`
}

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
	Mounts []api.WorkloadMount `json:"mounts,omitempty"`
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
	// RemoveImage, with Remove: the container's image leaves the user's
	// podman storage too, unless another container of the user still
	// uses it — a priced app's image, so that the renter cannot run it
	// by hand unmetered after its workload (docs/apps.md, "Prices").
	RemoveImage bool `json:"remove_image,omitempty"`
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
	Probe *api.WorkloadProbe `json:"probe,omitempty"`
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
func (r WorkloadReport) Failed() bool { return r.State == api.ContainerExited && r.ExitCode != 0 }

// VolumeTaskParams are the params of the volume tasks: the volume and,
// for create and resize, its size.
type VolumeTaskParams struct {
	VolumeID  string `json:"volume_id"`
	SizeBytes int64  `json:"size_bytes,omitempty"`
}

// VolumeTaskResult is what the volume tasks report.
type VolumeTaskResult struct {
	VolumeID  string `json:"volume_id"`
	SizeBytes int64  `json:"size_bytes,omitempty"`
	// FSSize is the filesystem's size; below SizeBytes after a resize
	// of a mounted volume the node could not grow online (it grows at
	// the next attach).
	FSSize int64 `json:"fs_size,omitempty"`
	// FreeBytes is the room the node has left for volumes.
	FreeBytes int64 `json:"free_bytes"`
}
