// Package host holds the interfaces through which hostd touches the
// machine: the hypervisor, the command runner and POSIX users. Task code
// depends only on these; the real implementations (go-libvirt, os/exec,
// useradd) and the sim ones (an in-process hypervisor whose VMs are SSH
// servers on loopback, sandbox users) both satisfy them.
package host

import "context"

// DomainState is the lifecycle state of a VM.
type DomainState string

// Domain states.
const (
	DomainRunning  DomainState = "running"
	DomainShutoff  DomainState = "shutoff"
	DomainPaused   DomainState = "paused"
	DomainCrashed  DomainState = "crashed"
	DomainOther    DomainState = "other"
	DomainNotFound DomainState = "not_found"
)

// PCIAddress is a PCI function in domain:bus:slot.function form,
// "0000:18:00.0".
type PCIAddress string

// Disk is a block device handed to a VM.
type Disk struct {
	Source string // host path: an NVMe by-id path or an image file
	Target string // guest device name: "vda", "vdb"
	// Raw disks are passed as-is; otherwise qcow2.
	Raw      bool
	ReadOnly bool
	// Serial, when set, is the disk's virtio serial (at most 20 bytes,
	// virtio-blk's VIRTIO_BLK_ID_BYTES): the guest finds the disk as
	// /dev/disk/by-id/virtio-<serial> or /sys/block/vdX/serial.
	Serial string
}

// DomainSpec is everything needed to define a slice VM.
type DomainSpec struct {
	Name      string // unique; the allocation id
	UUID      string
	VCPUs     int
	MemoryMiB int
	// NUMANode the VM's vCPUs and memory are pinned to; -1 for none.
	NUMANode int
	// CPUSet is the host CPUs the vCPUs may run on ("0-15,32-47").
	CPUSet string
	// HostDevs are passed through with VFIO: the GPUs and fabric VFs.
	HostDevs []PCIAddress
	Disks    []Disk
	// SeedISO is the cloud-init NoCloud seed image, attached as a CD-ROM.
	SeedISO string
	// Kernel, when set, boots the VM directly into this kernel with
	// Initrd and Cmdline instead of from its first disk's bootloader
	// (the guest image of hostd/guestimage has none).
	Kernel  string
	Initrd  string
	Cmdline string
	// DisableCPUFeatures are host CPU features the guest must not get
	// although the host model has them: quirks of the host, such as
	// "arch-capabilities" under nested KVM (see libvirt.CPUQuirks).
	DisableCPUFeatures []string
	// Emulate runs the guest under QEMU's software emulation (TCG)
	// instead of KVM: for hosts whose KVM cannot run the guest kernel.
	// Never on GPU hosts: it is orders of magnitude slower.
	Emulate bool
	// MAC of the VM's management NIC on Network.
	MAC     string
	Network string
	// SerialLog, when set, is a file the serial console's output is also
	// written to: what a guest said before it failed to become ready.
	SerialLog string
}

// Hypervisor is what the slice tasks need of libvirt; the sim implements
// it too.
type Hypervisor interface {
	// Define registers a persistent domain; defining an existing name
	// fails.
	Define(ctx context.Context, spec DomainSpec) error
	Start(ctx context.Context, name string) error
	// Shutdown asks the guest to power off (ACPI) and returns at once.
	Shutdown(ctx context.Context, name string) error
	// Destroy powers the domain off at once.
	Destroy(ctx context.Context, name string) error
	// Undefine removes the domain's definition.
	Undefine(ctx context.Context, name string) error
	// State reports a domain's state; DomainNotFound when unknown.
	State(ctx context.Context, name string) (DomainState, error)
	// List names the defined domains.
	List(ctx context.Context) ([]string, error)
}
