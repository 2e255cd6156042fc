package api

// VMImage names a base image and pins its content.
type VMImage struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
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
