package api

// Wire types of the typed tasks controld sends to hostd (docs/architecture.md, "Flows").

// DefaultSlotSubnet is the slot network when a discovery names none.
const DefaultSlotSubnet = "10.77.0.0/16"

// TopologyResult is what slice.topology_discover reports: the host's
// hardware, its readiness for the node's shape, and the slot map it
// proposes. Discovery never registers slots; an operator approves them.
// The host can serve CandidateSlots only when Blockers is empty.
type TopologyResult struct {
	HostName  string `json:"host_name"`
	Shape     string `json:"shape"`
	Kernel    string `json:"kernel"`
	MemoryMiB int64  `json:"memory_mib"`

	NUMANodes []NUMANode `json:"numa_nodes"`
	GPUs      []GPUInfo  `json:"gpus"`
	NVMe      []NVMeInfo `json:"nvme"`
	FabricVFs []VFInfo   `json:"fabric_vfs"`

	Prerequisites Prerequisites `json:"prerequisites"`

	CandidateSlots []CandidateSlot `json:"candidate_slots"`
	Blockers       []Blocker       `json:"blockers"`
}

// NUMANode is one NUMA node of a host.
type NUMANode struct {
	ID int `json:"id"`
	// CPUs is the kernel's cpulist, e.g. "0-55,112-167": the form libvirt
	// takes for a cpuset.
	CPUs      string `json:"cpus"`
	MemoryMiB int64  `json:"memory_mib"`
}

// GPUInfo is one NVIDIA GPU (vendor 0x10de, a display or 3D controller).
type GPUInfo struct {
	PCI      string `json:"pci"`
	Model    string `json:"model"`     // "H100", "H200", or "NVIDIA 0x<device>" when unknown
	DeviceID string `json:"device_id"` // PCI device id, "0x2330"
	NUMANode int    `json:"numa_node"` // -1 when the firmware does not say
	// IOMMUGroup is -1 when the IOMMU is off.
	IOMMUGroup int `json:"iommu_group"`
	// IOMMUPeers are the other devices in the GPU's IOMMU group.
	IOMMUPeers []string `json:"iommu_peers,omitempty"`
	// Driver is the bound kernel driver ("vfio-pci", "nvidia"); empty when
	// unbound.
	Driver string `json:"driver,omitempty"`
}

// NVMeInfo is one NVMe namespace.
type NVMeInfo struct {
	Name       string `json:"name"`       // block device, "nvme1n1"
	Controller string `json:"controller"` // "nvme1"
	PCI        string `json:"pci"`        // the controller's PCI address
	NUMANode   int    `json:"numa_node"`
	Model      string `json:"model"`
	Serial     string `json:"serial"`
	SizeBytes  int64  `json:"size_bytes"`
	// ByID is the stable path, /dev/disk/by-id/nvme-<model>_<serial>;
	// empty when udev made none, and then the namespace is not offered.
	ByID string `json:"by_id,omitempty"`
	// InUse is set when the namespace or a partition of it is mounted or
	// held (LVM, md, dm): such a namespace is never offered to a slot.
	InUse bool `json:"in_use,omitempty"`
}

// VFInfo is one Mellanox (vendor 0x15b3) SR-IOV virtual function.
type VFInfo struct {
	PCI        string `json:"pci"`
	PF         string `json:"pf"` // its physical function
	DeviceID   string `json:"device_id"`
	NUMANode   int    `json:"numa_node"`
	IOMMUGroup int    `json:"iommu_group"`
	Driver     string `json:"driver,omitempty"`
}

// Prerequisites are the host facts that decide whether VMs with VFIO
// passthrough can run.
type Prerequisites struct {
	KVM bool `json:"kvm"` // /dev/kvm exists
	// IOMMUGroups is how many IOMMU groups the kernel made; zero means the
	// IOMMU is off, whatever the command line says.
	IOMMUGroups int `json:"iommu_groups"`
	// IOMMUKernelArgs are the iommu settings on the kernel command line,
	// e.g. ["intel_iommu=on", "iommu=pt"].
	IOMMUKernelArgs []string `json:"iommu_kernel_args,omitempty"`
	// Modules are the loaded kernel modules of interest (kvm, vfio, ...).
	Modules []string `json:"modules,omitempty"`
	// VFIODevice is set when /dev/vfio/vfio exists.
	VFIODevice bool `json:"vfio_device"`
	// Commands maps each command looked for to its path; missing ones are
	// absent.
	Commands map[string]string `json:"commands,omitempty"`
}

// CandidateSlot is a GPU with what travels with it: on a slice host an NVMe
// namespace and a fabric VF on the GPU's NUMA node, and the management
// NIC's MAC and IP of the VM that gets it.
type CandidateSlot struct {
	Index  int    `json:"index"`
	GPUPCI string `json:"gpu_pci"`
	// GPUUUID is the GPU's UUID from the node's inventory (hostd's
	// gpuinventory.go); "" when unknown.
	GPUUUID  string `json:"gpu_uuid,omitempty"`
	NVMe     string `json:"nvme,omitempty"` // /dev/disk/by-id path
	FabricVF string `json:"fabric_vf,omitempty"`
	NUMANode int    `json:"numa_node"`
	MAC      string `json:"mac"`
	IP       string `json:"ip"`
}

// BlockerCode says, in a machine-readable way, why a host or a GPU cannot
// be offered.
type BlockerCode string

// Blocker codes. Host-wide ones leave Blocker.Device empty or name the
// missing module or command; the others name the device.
const (
	// BlockerNoGPUs: no NVIDIA GPU was found.
	BlockerNoGPUs BlockerCode = "no_gpus"
	// BlockerIOMMUDisabled: the kernel made no IOMMU groups (slice hosts).
	BlockerIOMMUDisabled BlockerCode = "iommu_disabled"
	// BlockerKVMMissing: /dev/kvm does not exist (slice hosts).
	BlockerKVMMissing BlockerCode = "kvm_missing"
	// BlockerVFIOModulesMissing: vfio, vfio_pci or vfio_iommu_type1 is not
	// loaded (slice hosts); Device names the module.
	BlockerVFIOModulesMissing BlockerCode = "vfio_modules_missing"
	// BlockerCommandMissing: a command the slice tasks run is not on PATH;
	// Device names it.
	BlockerCommandMissing BlockerCode = "command_missing"
	// BlockerGPUNotVFIOBound: a slice host's GPU is not bound to vfio-pci.
	BlockerGPUNotVFIOBound BlockerCode = "gpu_not_vfio_bound"
	// BlockerGPUNotNvidiaBound: a bare-metal host's GPU is not bound to the
	// nvidia driver.
	BlockerGPUNotNvidiaBound BlockerCode = "gpu_not_nvidia_bound"
	// BlockerGPUNoIOMMUGroup: the IOMMU is on but a GPU has no group.
	BlockerGPUNoIOMMUGroup BlockerCode = "gpu_no_iommu_group"
	// BlockerGPUIOMMUGroupShared: a GPU's IOMMU group holds devices other
	// than the GPU's own functions and PCI bridges, so it cannot be passed
	// through alone.
	BlockerGPUIOMMUGroupShared BlockerCode = "gpu_iommu_group_shared"
	// BlockerNoNVMeOnNUMA: no unused NVMe namespace is left on a slice
	// GPU's NUMA node.
	BlockerNoNVMeOnNUMA BlockerCode = "no_nvme_on_numa"
	// BlockerNoVFOnNUMA: no unused fabric VF is left on a slice GPU's NUMA
	// node.
	BlockerNoVFOnNUMA BlockerCode = "no_vf_on_numa"
)

// Blocker is one reason the host, or one GPU of it, cannot be offered.
type Blocker struct {
	Code    BlockerCode `json:"code"`
	Message string      `json:"message"`
	// Device is the PCI address, module or command concerned, if any.
	Device string `json:"device,omitempty"`
}
