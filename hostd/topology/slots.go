package topology

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
)

// plan pairs GPUs with NVMe namespaces and VFs, finds what blocks each GPU
// and fills r.CandidateSlots and r.Blockers.
//
// Pairing: on each NUMA node, the node's GPUs, its free namespaces (with a
// by-id path, not mounted or held) and its VFs are each sorted by PCI
// address, and the i-th GPU gets the i-th namespace and the i-th VF. All
// GPUs take part, blocked or not, so fixing one GPU never reshuffles the
// others' slots. A slice GPU must get both; a bare-metal GPU takes what
// there is.
//
// A GPU becomes a candidate slot when nothing blocks it; on a slice host
// that also needs the IOMMU on. Host-wide blockers other than the IOMMU
// (KVM, modules, commands) do not remove slots: the map stays right, and
// the host serves it once they are fixed.
func plan(r *api.TopologyResult, devs map[string]pciDev, opts Options) error {
	slice := opts.Shape == api.ShapeGPUSlice
	if len(r.GPUs) == 0 {
		r.Blockers = append(r.Blockers, api.Blocker{Code: api.BlockerNoGPUs, Message: "no NVIDIA GPU (vendor 0x10de, display or 3D controller) found"})
	}
	if slice {
		r.Blockers = append(r.Blockers, hostBlockers(r.Prerequisites)...)
	}
	iommuOn := r.Prerequisites.IOMMUGroups > 0
	nvme, vfs := pair(r)
	macs := map[string]bool{}
	for k, g := range r.GPUs {
		mac := slotMAC(opts.HostName, g.PCI, macs)
		ip, err := slotIP(opts.Subnet, k)
		if err != nil {
			return err
		}
		var blocked []api.Blocker
		if slice {
			blocked = sliceGPUBlockers(g, devs, iommuOn, nvme[k], vfs[k])
		} else if g.Driver != "nvidia" {
			blocked = append(blocked, api.Blocker{Code: api.BlockerGPUNotNvidiaBound, Device: g.PCI,
				Message: fmt.Sprintf("GPU %s is %s; bare-metal renters need the nvidia driver", g.PCI, boundTo(g.Driver))})
		}
		r.Blockers = append(r.Blockers, blocked...)
		if len(blocked) > 0 || slice && !iommuOn {
			continue
		}
		r.CandidateSlots = append(r.CandidateSlots, api.CandidateSlot{Index: len(r.CandidateSlots), GPUPCI: g.PCI,
			NVMe: nvme[k], FabricVF: vfs[k], NUMANode: g.NUMANode, MAC: mac, IP: ip.String()})
	}
	return nil
}

// pair returns, by GPU index, the by-id path and the VF each GPU gets.
func pair(r *api.TopologyResult) (nvme, vfs []string) {
	freeNVMe := map[int][]string{}
	for _, n := range r.NVMe {
		if n.ByID != "" && !n.InUse {
			freeNVMe[n.NUMANode] = append(freeNVMe[n.NUMANode], n.ByID)
		}
	}
	freeVFs := map[int][]string{}
	for _, v := range r.FabricVFs {
		freeVFs[v.NUMANode] = append(freeVFs[v.NUMANode], v.PCI)
	}
	nvme, vfs = make([]string, len(r.GPUs)), make([]string, len(r.GPUs))
	seen := map[int]int{} // GPUs met so far per NUMA node
	for k, g := range r.GPUs {
		i := seen[g.NUMANode]
		seen[g.NUMANode]++
		if i < len(freeNVMe[g.NUMANode]) {
			nvme[k] = freeNVMe[g.NUMANode][i]
		}
		if i < len(freeVFs[g.NUMANode]) {
			vfs[k] = freeVFs[g.NUMANode][i]
		}
	}
	return nvme, vfs
}

// sliceGPUBlockers are what stops one GPU of a slice host, in a fixed
// order. With the IOMMU off the passthrough checks are moot: the host
// reports iommu_disabled once instead.
func sliceGPUBlockers(g api.GPUInfo, devs map[string]pciDev, iommuOn bool, nvme, vf string) []api.Blocker {
	var out []api.Blocker
	if iommuOn {
		if g.IOMMUGroup < 0 {
			out = append(out, api.Blocker{Code: api.BlockerGPUNoIOMMUGroup, Device: g.PCI,
				Message: fmt.Sprintf("GPU %s has no IOMMU group", g.PCI)})
		} else if foreign := foreignPeers(devs[g.PCI], devs); len(foreign) > 0 {
			out = append(out, api.Blocker{Code: api.BlockerGPUIOMMUGroupShared, Device: g.PCI,
				Message: fmt.Sprintf("GPU %s shares IOMMU group %d with %s; it cannot be passed through alone (check ACS on the PCIe switch above it)",
					g.PCI, g.IOMMUGroup, strings.Join(foreign, ", "))})
		}
		if g.Driver != "vfio-pci" {
			out = append(out, api.Blocker{Code: api.BlockerGPUNotVFIOBound, Device: g.PCI,
				Message: fmt.Sprintf("GPU %s is %s; slices need it on vfio-pci (driverctl set-override %s vfio-pci)", g.PCI, boundTo(g.Driver), g.PCI)})
		}
	}
	if nvme == "" {
		out = append(out, api.Blocker{Code: api.BlockerNoNVMeOnNUMA, Device: g.PCI,
			Message: fmt.Sprintf("no free NVMe namespace with a by-id path is left on NUMA node %d for GPU %s", g.NUMANode, g.PCI)})
	}
	if vf == "" {
		out = append(out, api.Blocker{Code: api.BlockerNoVFOnNUMA, Device: g.PCI,
			Message: fmt.Sprintf("no Mellanox VF is left on NUMA node %d for GPU %s", g.NUMANode, g.PCI)})
	}
	return out
}

func boundTo(driver string) string {
	if driver == "" {
		return "bound to no driver"
	}
	return "bound to " + driver
}

// slotMAC is the MAC of the VM NIC that goes with a GPU: the locally
// administered, unicast prefix 02 followed by the first five bytes of
// SHA-256("<host>/<gpu pci>"). On the rare collision within a host the
// hash is retried with "/1", "/2", ... appended, in GPU order.
func slotMAC(host, gpu string, taken map[string]bool) string {
	for try := 0; ; try++ {
		seed := host + "/" + gpu
		if try > 0 {
			seed += fmt.Sprintf("/%d", try)
		}
		sum := sha256.Sum256([]byte(seed))
		mac := net.HardwareAddr{0x02, sum[0], sum[1], sum[2], sum[3], sum[4]}.String()
		if !taken[mac] {
			taken[mac] = true
			return mac
		}
	}
}

// Slot addresses. The slot network is private to each host (NATed behind
// the host's bridge, which is subnet+1, 10.77.0.1), so addresses need only
// be unique within a host and repeat from host to host.
const (
	// firstSlotOffset puts the first slot at subnet + 0.0.1.10
	// (10.77.1.10), clear of the gateway and anything else on 10.77.0.x.
	firstSlotOffset = 256 + 10
	// maxSubnetBits is the smallest slot network accepted: a /23 still
	// holds 245 GPUs.
	maxSubnetBits = 23
)

// slotIP is the address of the VM that gets the k-th GPU of the host,
// counting from 0 over all its GPUs sorted by PCI address, blocked or not:
// subnet + firstSlotOffset + k. 10.77.0.0/16 gives 10.77.1.10, 10.77.1.11,
// ... Counting every GPU keeps an address fixed to its GPU when others
// are blocked or fixed.
func slotIP(subnet netip.Prefix, k int) (netip.Addr, error) {
	size := uint64(1) << (32 - subnet.Bits())
	off := uint64(firstSlotOffset + k)
	if off >= size-1 { // keep off the broadcast address
		return netip.Addr{}, fmt.Errorf("%w: %s has no address for GPU %d", ErrSubnetFull, subnet, k)
	}
	b := subnet.Addr().As4()
	n := binary.BigEndian.Uint32(b[:]) + uint32(off)
	binary.BigEndian.PutUint32(b[:], n)
	return netip.AddrFrom4(b), nil
}
