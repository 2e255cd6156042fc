// Package topology is the slice.topology_discover task's work: it reads a
// host's sysfs, devfs and procfs and reports its GPUs, NVMe namespaces,
// Mellanox VFs, NUMA layout and VFIO prerequisites, the slots they make and
// what blocks them. It never writes anything: slots are registered by
// controld once an operator approves them.
package topology

import (
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Host is the machine as discovery sees it: three file trees and a PATH
// lookup. Sys and Dev must implement fs.ReadLinkFS, since what a device
// is bound to, its IOMMU group and the by-id names are all symlinks.
type Host struct {
	Sys  fs.FS // /sys
	Dev  fs.FS // /dev
	Proc fs.FS // /proc
	// LookPath finds a program on PATH, as exec.LookPath does.
	LookPath func(string) (string, error)
}

// Real is the machine hostd runs on.
func Real() Host { return At("/", exec.LookPath) }

// At is a host whose /sys, /dev and /proc are under root: "/" for the real
// one, a directory written by hostd/sim.WriteTree for a simulated one.
func At(root string, lookPath func(string) (string, error)) Host {
	r := os.DirFS(root)
	sub := func(dir string) fs.FS {
		s, _ := fs.Sub(r, dir) // fails only for an invalid dir name
		return s
	}
	return Host{Sys: sub("sys"), Dev: sub("dev"), Proc: sub("proc"), LookPath: lookPath}
}

// Options say what the host is for.
type Options struct {
	// Shape is api.ShapeGPUSlice or api.ShapeBaremetal. Slice hosts need
	// an NVMe namespace and a VF per GPU, VFIO and KVM; bare-metal hosts
	// need only their GPUs on the nvidia driver.
	Shape string
	// HostName seeds the slots' MAC addresses.
	HostName string
	// Subnet is the IPv4 slot network; the zero value means
	// api.DefaultSlotSubnet. See slotIP for how addresses are drawn.
	Subnet netip.Prefix
}

func (o *Options) checkAndSetDefaults() error {
	if o.Shape != api.ShapeGPUSlice && o.Shape != api.ShapeBaremetal {
		return fmt.Errorf("%w: unknown shape %q", ErrInvalidOptions, o.Shape)
	}
	if o.HostName == "" {
		return fmt.Errorf("%w: no host name", ErrInvalidOptions)
	}
	if !o.Subnet.IsValid() {
		o.Subnet = netip.MustParsePrefix(api.DefaultSlotSubnet)
	}
	o.Subnet = o.Subnet.Masked()
	if !o.Subnet.Addr().Is4() || o.Subnet.Bits() > maxSubnetBits {
		return fmt.Errorf("%w: slot subnet %s is not an IPv4 network of /%d or larger", ErrInvalidOptions, o.Subnet, maxSubnetBits)
	}
	return nil
}

// Discover reports the host's topology and the candidate slots for the
// shape. Errors are for bad options or an unreadable PCI bus; anything the
// host lacks is reported as a Blocker instead.
func Discover(h Host, opts Options) (api.TopologyResult, error) {
	if err := opts.checkAndSetDefaults(); err != nil {
		return api.TopologyResult{}, err
	}
	if err := h.check(); err != nil {
		return api.TopologyResult{}, err
	}
	devs, err := scanPCI(h.Sys)
	if err != nil {
		return api.TopologyResult{}, err
	}
	r := api.TopologyResult{
		HostName:  opts.HostName,
		Shape:     opts.Shape,
		Kernel:    readString(h.Proc, "sys/kernel/osrelease"),
		MemoryMiB: meminfoKiB(h.Proc, "meminfo", "MemTotal:") / 1024,
		NUMANodes: numaNodes(h.Sys),
	}
	numa := numaFixer(r.NUMANodes)
	for _, d := range devs {
		d.numa = numa(d.numa)
		switch {
		case d.isNVIDIAGPU():
			r.GPUs = append(r.GPUs, d.gpuInfo())
		case d.isMellanoxVF():
			r.FabricVFs = append(r.FabricVFs, d.vfInfo())
		}
	}
	r.NVMe = scanNVMe(h, numa)
	r.Prerequisites = prerequisites(h, opts.Shape)
	byAddr := map[string]pciDev{}
	for _, d := range devs {
		byAddr[d.addr] = d
	}
	if err := plan(&r, byAddr, opts); err != nil {
		return api.TopologyResult{}, err
	}
	return r, nil
}

func (h Host) check() error {
	if _, ok := h.Sys.(fs.ReadLinkFS); !ok {
		return fmt.Errorf("%w: sys does not read symlinks", ErrInvalidHost)
	}
	if _, ok := h.Dev.(fs.ReadLinkFS); !ok {
		return fmt.Errorf("%w: dev does not read symlinks", ErrInvalidHost)
	}
	if h.Proc == nil || h.LookPath == nil {
		return fmt.Errorf("%w: no proc or LookPath", ErrInvalidHost)
	}
	return nil
}

// numaFixer maps a device's numa_node to a node: firmware that does not
// say (-1) on a host with a single node means that node.
func numaFixer(nodes []api.NUMANode) func(int) int {
	return func(n int) int {
		if n < 0 && len(nodes) <= 1 {
			if len(nodes) == 1 {
				return nodes[0].ID
			}
			return 0
		}
		return n
	}
}

// iommuArgs are the IOMMU settings on a kernel command line.
func iommuArgs(cmdline string) []string {
	var out []string
	for _, f := range strings.Fields(cmdline) {
		k, _, _ := strings.Cut(f, "=")
		if strings.Contains(k, "iommu") {
			out = append(out, f)
		}
	}
	return slices.Clip(out)
}
