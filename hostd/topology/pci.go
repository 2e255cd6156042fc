package topology

import (
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
)

// PCI ids discovery looks for.
const (
	vendorNVIDIA   = 0x10de
	vendorMellanox = 0x15b3
	// Class codes without the programming interface byte.
	classVGA    = 0x0300
	class3D     = 0x0302
	classBridge = 0x0604 // PCI-to-PCI bridges and PCIe ports
)

// gpuModels names the NVIDIA device ids the catalog sells.
var gpuModels = map[uint32]string{
	0x2330: "H100", // H100 SXM5 80GB
	0x2331: "H100", // H100 PCIe
	0x2335: "H200", // H200 SXM 141GB
}

// pciDev is one PCI function as sysfs shows it under bus/pci/devices.
type pciDev struct {
	addr           string // "0000:18:00.0"
	vendor, device uint32
	class          uint32 // 24 bits: class, subclass, programming interface
	numa           int
	group          int // -1 without an IOMMU group
	driver         string
	physfn         string // a VF's physical function
	peers          []string
}

// scanPCI reads every PCI function, sorted by address.
func scanPCI(sys fs.FS) ([]pciDev, error) {
	entries, err := fs.ReadDir(sys, "bus/pci/devices")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoPCI, err)
	}
	var out []pciDev
	for _, e := range entries {
		dir := "bus/pci/devices/" + e.Name()
		d := pciDev{
			addr:   strings.ToLower(e.Name()),
			vendor: readHex(sys, dir+"/vendor"),
			device: readHex(sys, dir+"/device"),
			class:  readHex(sys, dir+"/class"),
			numa:   readInt(sys, dir+"/numa_node", -1),
			group:  -1,
			driver: linkBase(sys, dir+"/driver"),
			physfn: strings.ToLower(linkBase(sys, dir+"/physfn")),
		}
		if g := linkBase(sys, dir+"/iommu_group"); g != "" {
			if n, err := strconv.Atoi(g); err == nil {
				d.group = n
				d.peers = groupPeers(sys, g, d.addr)
			}
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b pciDev) int { return strings.Compare(a.addr, b.addr) })
	return out, nil
}

// groupPeers lists the other functions in an IOMMU group.
func groupPeers(sys fs.FS, group, self string) []string {
	entries, err := fs.ReadDir(sys, "kernel/iommu_groups/"+group+"/devices")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if a := strings.ToLower(e.Name()); a != self {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

func (d pciDev) isNVIDIAGPU() bool {
	c := d.class >> 8
	return d.vendor == vendorNVIDIA && (c == class3D || c == classVGA)
}

func (d pciDev) isMellanoxVF() bool { return d.vendor == vendorMellanox && d.physfn != "" }

func (d pciDev) isBridge() bool { return d.class>>8 == classBridge }

func (d pciDev) gpuInfo() api.GPUInfo {
	model, ok := gpuModels[d.device]
	if !ok {
		model = fmt.Sprintf("NVIDIA 0x%04x", d.device)
	}
	return api.GPUInfo{PCI: d.addr, Model: model, DeviceID: fmt.Sprintf("0x%04x", d.device), NUMANode: d.numa,
		IOMMUGroup: d.group, IOMMUPeers: d.peers, Driver: d.driver}
}

func (d pciDev) vfInfo() api.VFInfo {
	return api.VFInfo{PCI: d.addr, PF: d.physfn, DeviceID: fmt.Sprintf("0x%04x", d.device), NUMANode: d.numa,
		IOMMUGroup: d.group, Driver: d.driver}
}

// sameSlot reports whether two functions are functions of one device
// (domain:bus:device match): a GPU's own audio or USB function.
func sameSlot(a, b string) bool {
	ia, ib := strings.LastIndexByte(a, '.'), strings.LastIndexByte(b, '.')
	return ia > 0 && ib > 0 && a[:ia] == b[:ib]
}

// foreignPeers are the members of a GPU's IOMMU group that stop it being
// passed through alone: anything but the GPU's own functions and PCI
// bridges (VFIO leaves bridges to the host).
func foreignPeers(gpu pciDev, all map[string]pciDev) []string {
	var out []string
	for _, p := range gpu.peers {
		if sameSlot(p, gpu.addr) || all[p].isBridge() {
			continue
		}
		out = append(out, p)
	}
	return out
}
