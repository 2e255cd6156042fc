// Package sim describes the simulated GPU hosts that `gpuaas dev` and the
// tests run: their GPUs with the NVMe namespace and fabric VF that travel
// with each, the NUMA layout and the kernel facts, and writes them out as a
// sysfs/devfs/procfs tree that hostd/topology discovers like a real host.
package sim

import (
	"fmt"
	"hash/fnv"
	"os/exec"
	"slices"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
)

// PCI vendor and device ids of the simulated hardware.
const (
	VendorNVIDIA   = 0x10de
	VendorMellanox = 0x15b3
	VendorSamsung  = 0x144d
	VendorIntel    = 0x8086
	VendorAMD      = 0x1022

	DeviceH100          = 0x2330 // GH100 [H100 SXM5 80GB]
	DeviceH200          = 0x2335 // GH100 [H200 SXM 141GB]
	DeviceNVSwitch      = 0x22a3 // GH100 [H100 NVSwitch]
	DeviceCX7           = 0x1021 // MT2910 Family [ConnectX-7]
	DeviceCX7VF         = 0x101e // ConnectX Family mlx5Gen Virtual Function
	DevicePM1733        = 0xa824 // NVMe SSD Controller PM173X
	deviceRootPortIntel = 0x352a
	deviceRootPortAMD   = 0x14ab
)

// PCI class codes (class, subclass, programming interface).
const (
	Class3D          = 0x030200
	ClassNVMe        = 0x010802
	ClassEthernet    = 0x020000
	ClassOtherBridge = 0x068000 // "Bridge: other", as NVSwitches are
	ClassPCIPort     = 0x060400
)

// gpuDeviceIDs maps the GPU models the sim knows to their PCI device ids;
// other models are given H100's.
var gpuDeviceIDs = map[string]uint16{"H100": DeviceH100, "H200": DeviceH200}

// Profile is a simulated GPU host. Its fields are plain data: tests change
// them (or use the knobs in knobs.go) to break the host in known ways.
type Profile struct {
	Name     string
	Shape    string // api.ShapeGPUSlice or api.ShapeBaremetal
	GPUModel string
	// CPUVendor is "intel" or "amd"; it picks kvm_intel or kvm_amd.
	CPUVendor string
	Kernel    string // osrelease
	// Cmdline is the kernel command line without the IOMMU settings.
	Cmdline string
	// IOMMUArgs are added to the command line unless IOMMUOff.
	IOMMUArgs []string

	NUMANodes []NUMANode
	GPUs      []GPU
	NVMe      []NVMe
	VFs       []VF
	// Other PCI functions: NVSwitches, the VFs' physical functions, and
	// anything a test adds. Root ports are made up by WriteTree.
	Other []Device

	// Modules are the loaded kernel modules, by module name (vfio_pci).
	Modules []string
	// Commands are the programs on PATH (see LookPath).
	Commands []string

	// IOMMUOff: no IOMMU settings on the command line and no IOMMU groups,
	// as when VT-d/AMD-Vi is off in the firmware.
	IOMMUOff bool
	// NoKVM: no /dev/kvm and no kvm modules.
	NoKVM bool
	// NoVFIOModules: no vfio modules and no /dev/vfio.
	NoVFIOModules bool
}

// NUMANode is one NUMA node and the PCI host bridge of its devices.
type NUMANode struct {
	ID        int
	CPUs      string // cpulist, "0-55,112-167"
	MemoryMiB int64
	// RootBus is the bus of the node's PCI host bridge (pci0000:<bus>).
	RootBus int
}

// Func is what every PCI function has.
type Func struct {
	PCI        string // "0000:18:00.0"
	NUMANode   int
	IOMMUGroup int
	Driver     string // "" for unbound
}

// GPU is an NVIDIA GPU.
type GPU struct {
	Func
	DeviceID uint16
}

// NVMe is an NVMe controller with one namespace, nvme<Instance>n1.
type NVMe struct {
	Func
	Instance  int
	Model     string
	Serial    string
	SizeBytes int64
	// Mounts maps partition numbers to mount points; a namespace with
	// mounts is the host's own disk.
	Mounts map[int]string
	// ForGPU is the GPU this namespace is meant to travel with; empty for
	// spares and the boot disk.
	ForGPU string
}

// VF is a Mellanox SR-IOV virtual function.
type VF struct {
	Func
	PF     string // the physical function's PCI address, one of Other
	ForGPU string // as NVMe.ForGPU
}

// Device is any other PCI function.
type Device struct {
	Func
	Vendor, DeviceID uint16
	Class            uint32
}

// Namespace is the namespace's block device name, "nvme1n1".
func (n NVMe) Namespace() string { return fmt.Sprintf("nvme%dn1", n.Instance) }

// ByIDName is the namespace's name under /dev/disk/by-id, made the way udev
// makes it: "nvme-" + model + "_" + serial, whitespace turned into "_".
func (n NVMe) ByIDName() string {
	return "nvme-" + udevSafe(n.Model) + "_" + udevSafe(n.Serial)
}

// ByID is the namespace's stable path.
func (n NVMe) ByID() string { return "/dev/disk/by-id/" + n.ByIDName() }

func udevSafe(s string) string { return strings.Join(strings.Fields(s), "_") }

// LookPath finds a command among the profile's Commands, as exec.LookPath
// would on the host.
func (p Profile) LookPath(name string) (string, error) {
	if slices.Contains(p.Commands, name) {
		return "/usr/bin/" + name, nil
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}

// MemoryMiB is the host's memory, the sum of its NUMA nodes'.
func (p Profile) MemoryMiB() int64 {
	var n int64
	for _, nn := range p.NUMANodes {
		n += nn.MemoryMiB
	}
	return n
}

// Slots are the slots the profile is built to have: each GPU with the
// NVMe namespace and VF meant for it, in GPU order. Discovery of a healthy
// profile must find exactly these.
func (p Profile) Slots() []api.SlotSpec {
	var out []api.SlotSpec
	for _, g := range p.GPUs {
		s := api.SlotSpec{GPUPCI: g.PCI, NUMANode: g.NUMANode}
		for _, n := range p.NVMe {
			if n.ForGPU == g.PCI {
				s.NVMe = n.ByID()
			}
		}
		for _, v := range p.VFs {
			if v.ForGPU == g.PCI {
				s.FabricVF = v.PCI
			}
		}
		out = append(out, s)
	}
	return out
}

// Spec is the node registration the profile stands for.
func (p Profile) Spec() api.NodeSpec {
	return api.NodeSpec{Name: p.Name, Shape: p.Shape, GPUModel: p.GPUModel, Slots: p.Slots()}
}

// H200Slice8 is an Intel 8×H200 gpu_slice host: two NUMA nodes, each with
// 4 GPUs bound to vfio-pci, 4 data NVMe namespaces and 4 ConnectX-7 VFs,
// plus a mounted boot NVMe and 4 NVSwitches on node 0.
func H200Slice8() Profile { return sliceProfile("sim-h200-1", "H200") }

// H100Baremetal8 is an AMD 8×H100 host rented whole: the same PCI layout
// as H200Slice8, GPUs bound to nvidia, no vfio modules, the IOMMU on by
// default (no kernel arguments).
func H100Baremetal8() Profile { return baremetalProfile("sim-h100-1", "H100") }

// SliceHost is an 8-GPU gpu_slice host: 4 GPUs on each of two NUMA nodes,
// each GPU paired with an NVMe namespace and a fabric VF on its NUMA node.
func SliceHost(name, model string) api.NodeSpec { return sliceProfile(name, model).Spec() }

// BaremetalHost is an 8-GPU host rented whole.
func BaremetalHost(name, model string) api.NodeSpec { return baremetalProfile(name, model).Spec() }

// DevFleet is what `gpuaas dev` runs by default: one 8×H200 slice host and
// one 8×H100 bare-metal host.
func DevFleet() []api.NodeSpec {
	return []api.NodeSpec{H200Slice8().Spec(), H100Baremetal8().Spec()}
}

func sliceProfile(name, model string) Profile {
	p := hgx8(name, model, "vfio-pci", "")
	p.Shape = api.ShapeGPUSlice
	p.CPUVendor = "intel"
	p.Kernel = "6.8.0-51-generic"
	p.Cmdline = "BOOT_IMAGE=/boot/vmlinuz-6.8.0-51-generic root=UUID=6f1c2a7e-3b9d-4e58-a0c1-2d4b8e9f7a31 ro quiet"
	p.IOMMUArgs = []string{"intel_iommu=on", "iommu=pt"}
	p.NUMANodes = []NUMANode{
		{ID: 0, CPUs: "0-55,112-167", MemoryMiB: 1031680, RootBus: 0x00},
		{ID: 1, CPUs: "56-111,168-223", MemoryMiB: 1032192, RootBus: 0x50},
	}
	p.Modules = []string{"kvm", "kvm_intel", "vfio", "vfio_pci", "vfio_pci_core", "vfio_iommu_type1", "nvme", "mlx5_core"}
	p.Commands = []string{"qemu-system-x86_64", "qemu-img", "cloud-localds", "virsh"}
	return p
}

func baremetalProfile(name, model string) Profile {
	p := hgx8(name, model, "nvidia", "nvidia")
	p.Shape = api.ShapeBaremetal
	p.CPUVendor = "amd"
	p.Kernel = "5.15.0-127-generic"
	p.Cmdline = "BOOT_IMAGE=/boot/vmlinuz-5.15.0-127-generic root=UUID=0b7e4d2c-91a8-4f3e-b6d5-7c2e1a9f4b08 ro"
	p.NUMANodes = []NUMANode{
		{ID: 0, CPUs: "0-95,192-287", MemoryMiB: 773120, RootBus: 0x00},
		{ID: 1, CPUs: "96-191,288-383", MemoryMiB: 774144, RootBus: 0x50},
	}
	p.Modules = []string{"kvm", "kvm_amd", "nvidia", "nvidia_uvm", "nvme", "mlx5_core"}
	p.Commands = []string{"nvidia-smi"}
	return p
}

// hgx8 lays out an 8-GPU board. GPU i sits at bus 0x18+0x10*i on NUMA node
// i/4, its NVMe controller on the next bus, and its VF is function
// i%4+1 of the ConnectX PF of its node (0000:a0:00.0, 0000:a1:00.0).
func hgx8(name, model, gpuDriver, switchDriver string) Profile {
	p := Profile{Name: name, GPUModel: model}
	group := 10
	next := func() int { group++; return group }
	devID, ok := gpuDeviceIDs[model]
	if !ok {
		devID = DeviceH100
	}
	for i := range 4 {
		p.Other = append(p.Other, Device{Func: Func{PCI: fmt.Sprintf("0000:%02x:00.0", 0x05+i), IOMMUGroup: next(), Driver: switchDriver},
			Vendor: VendorNVIDIA, DeviceID: DeviceNVSwitch, Class: ClassOtherBridge})
	}
	for n := range 2 {
		p.Other = append(p.Other, Device{Func: Func{PCI: fmt.Sprintf("0000:%02x:00.0", 0xa0+n), NUMANode: n, IOMMUGroup: next(), Driver: "mlx5_core"},
			Vendor: VendorMellanox, DeviceID: DeviceCX7, Class: ClassEthernet})
	}
	p.NVMe = append(p.NVMe, NVMe{Func: Func{PCI: "0000:03:00.0", IOMMUGroup: next(), Driver: "nvme"},
		Instance: 0, Model: "SAMSUNG MZ1L21T9HCLS-00A07", Serial: serial(name, "B", 0), SizeBytes: 1920383410176,
		Mounts: map[int]string{1: "/boot/efi", 2: "/"}})
	for i := range 8 {
		numa := i / 4
		gpu := fmt.Sprintf("0000:%02x:00.0", 0x18+i*0x10)
		p.GPUs = append(p.GPUs, GPU{Func: Func{PCI: gpu, NUMANode: numa, IOMMUGroup: next(), Driver: gpuDriver}, DeviceID: devID})
		p.NVMe = append(p.NVMe, NVMe{Func: Func{PCI: fmt.Sprintf("0000:%02x:00.0", 0x19+i*0x10), NUMANode: numa, IOMMUGroup: next(), Driver: "nvme"},
			Instance: i + 1, Model: "SAMSUNG MZWLR3T8HBLS-00007", Serial: serial(name, "D", i), SizeBytes: 3840755982336, ForGPU: gpu})
		p.VFs = append(p.VFs, VF{Func: Func{PCI: fmt.Sprintf("0000:%02x:00.%d", 0xa0+numa, i%4+1), NUMANode: numa, IOMMUGroup: next(), Driver: "mlx5_core"},
			PF: fmt.Sprintf("0000:%02x:00.0", 0xa0+numa), ForGPU: gpu})
	}
	return p
}

// serial makes a drive serial that differs from host to host.
func serial(host, kind string, i int) string {
	h := fnv.New32a()
	h.Write([]byte(host))
	return fmt.Sprintf("S6SIM%s%06X%02d", kind, h.Sum32()&0xffffff, i)
}
