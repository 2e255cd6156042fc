package api

import "time"

// VMImage names a base image and pins its content.
type VMImage struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

// VMProvisionParams are the params of slice.vm_provision.
type VMProvisionParams struct {
	AllocationID string   `json:"allocation_id"`
	UserID       string   `json:"user_id"`
	PosixUser    string   `json:"posix_user"`
	Slots        []Slot   `json:"slots"`
	VCPUs        int      `json:"vcpus"`
	MemoryMiB    int      `json:"memory_mib"`
	Image        VMImage  `json:"image"`
	SSHKeys      []string `json:"ssh_keys,omitempty"`
	// Volumes are handed to the VM as disks, which its guest mounts at
	// their paths (docs/decisions/0030-volumes-in-slices.md).
	Volumes []VolumeAttachment `json:"volumes,omitempty"`
}

// VMProvisionResult is what slice.vm_provision reports.
type VMProvisionResult struct {
	Domain  string `json:"domain"`
	Address string `json:"address"` // host:port of the VM's sshd
	// DriverCheck is what the guest's driver check found; controld fails
	// the allocation when it is absent (fail closed).
	DriverCheck *DriverCheck `json:"driver_check,omitempty"`
}

// VMReleaseParams are the params of slice.vm_release. Cleanup marks the
// release that follows a failed provisioning: every step tolerates what
// was never created.
type VMReleaseParams struct {
	AllocationID    string        `json:"allocation_id"`
	Slots           []Slot        `json:"slots"`
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
	Volumes []VolumeAttachment `json:"volumes,omitempty"`
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
	Removed *UserRemoved `json:"removed,omitempty"`
}

// UserRemoved counts what a bare-metal release removed of the
// allocation's user besides its account and home.
type UserRemoved struct {
	// Files are files, directories, links, sockets and fifos the user
	// owned anywhere on the node's local filesystems, its private /tmp
	// and /var/tmp included.
	Files int `json:"files"`
	// IPC are System V shared memory segments, semaphore sets and
	// message queues.
	IPC int `json:"ipc"`
	// Jobs are crontabs and at jobs.
	Jobs int `json:"jobs"`
}

// Task types (docs/architecture.md, "Flows"; CONTRIBUTING.md, "add a task type").
const (
	TaskHealthProbe      = "diag.health_probe"
	TaskTopologyDiscover = "slice.topology_discover"
	TaskVMProvision      = "slice.vm_provision"
	TaskVMRelease        = "slice.vm_release"
	TaskProvisionUser    = "allocation.provision_user"
	TaskDeprovisionUser  = "allocation.deprovision_user"
	// Jobs (docs/jobs.md): node tasks, not the allocation's, so a job
	// running does not hold back the allocation's other tasks.
	TaskJobStart = "job.start"
	TaskJobWait  = "job.wait"
	TaskJobStop  = "job.stop"
	// Workloads (docs/apps.md): node tasks too, run as the allocation's
	// user with rootless podman.
	TaskWorkloadStart  = "workload.start"
	TaskWorkloadStop   = "workload.stop"
	TaskWorkloadStatus = "workload.status"
)

// Operations an allocation's tasks carry out: what `alloc create --wait`
// and `alloc release --wait` follow.
const (
	OpProvision = "provision"
	OpRelease   = "release"
)

// TaskOperation is the operation a task type carries out: OpProvision,
// OpRelease, or "" for a task that is no allocation's.
func TaskOperation(taskType string) string {
	switch taskType {
	case TaskVMProvision, TaskProvisionUser:
		return OpProvision
	case TaskVMRelease, TaskDeprovisionUser:
		return OpRelease
	}
	return ""
}
