package tasks

import "errors"

var (
	// ErrInvalidParams is returned, before any phase runs, for params a
	// handler cannot act on safely.
	ErrInvalidParams = errors.New("invalid task params")
	// ErrDeviceLeased is returned when a device is in another
	// allocation's lease: the host's own guard against double booking.
	ErrDeviceLeased = errors.New("device leased to another allocation")
	// ErrNotVFIOBound is returned when a device to pass through is not
	// bound to vfio-pci.
	ErrNotVFIOBound = errors.New("device not bound to vfio-pci")
	// ErrImageMissing is returned when the base image file is absent.
	ErrImageMissing = errors.New("base image missing")
	// ErrImageChecksum is returned when the base image's SHA-256 is not
	// the pinned one.
	ErrImageChecksum = errors.New("base image checksum mismatch")
	// ErrNotReady is returned when a VM's sshd does not answer in time.
	ErrNotReady = errors.New("vm not ready")
	// ErrWorkloadStopped ends a workload.start when a workload.stop came
	// before its container was made (workload_starting.go).
	ErrWorkloadStopped = errors.New("the workload was stopped before its container was made")
)
