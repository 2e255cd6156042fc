package topology

import (
	"cmp"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Kernel modules of interest. A module built into the kernel also has a
// /sys/module directory when it takes parameters, as all of these do.
var (
	kvmModules  = []string{"kvm", "kvm_intel", "kvm_amd"}
	vfioModules = []string{"vfio", "vfio_pci", "vfio_iommu_type1"}
	gpuModules  = []string{"nvidia"}
)

// Programs the slice tasks run. seedTools are alternatives: one is enough.
var (
	sliceCommands = []string{"qemu-system-x86_64", "qemu-img", "virsh"}
	seedTools     = []string{"cloud-localds", "genisoimage"}
)

// numaNodes reads sys/devices/system/node/node<N>, sorted by id.
func numaNodes(sys fs.FS) []api.NUMANode {
	entries, _ := fs.ReadDir(sys, "devices/system/node")
	var out []api.NUMANode
	for _, e := range entries {
		id, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "node"))
		if err != nil || !strings.HasPrefix(e.Name(), "node") {
			continue
		}
		dir := "devices/system/node/" + e.Name()
		out = append(out, api.NUMANode{ID: id, CPUs: readString(sys, dir+"/cpulist"),
			MemoryMiB: meminfoKiB(sys, dir+"/meminfo", fmt.Sprintf("Node %d MemTotal:", id)) / 1024})
	}
	slices.SortFunc(out, func(a, b api.NUMANode) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

func prerequisites(h Host, shape string) api.Prerequisites {
	p := api.Prerequisites{
		KVM:             exists(h.Dev, "kvm"),
		IOMMUKernelArgs: iommuArgs(readString(h.Proc, "cmdline")),
		VFIODevice:      exists(h.Dev, "vfio/vfio"),
	}
	groups, _ := fs.ReadDir(h.Sys, "kernel/iommu_groups")
	p.IOMMUGroups = len(groups)
	for _, m := range slices.Concat(kvmModules, vfioModules, gpuModules) {
		if exists(h.Sys, "module/"+m) {
			p.Modules = append(p.Modules, m)
		}
	}
	if shape == api.ShapeGPUSlice {
		for _, c := range slices.Concat(sliceCommands, seedTools) {
			if where, err := h.LookPath(c); err == nil {
				if p.Commands == nil {
					p.Commands = map[string]string{}
				}
				p.Commands[c] = where
			}
		}
	}
	return p
}

// hostBlockers are what stops a slice host as a whole, in a fixed order.
func hostBlockers(p api.Prerequisites) []api.Blocker {
	var out []api.Blocker
	if p.IOMMUGroups == 0 {
		msg := "the kernel made no IOMMU groups: the IOMMU is off; enable VT-d/AMD-Vi in the firmware"
		if len(p.IOMMUKernelArgs) == 0 {
			msg += " and add intel_iommu=on iommu=pt (Intel) or iommu=pt (AMD) to the kernel command line"
		} else {
			msg += fmt.Sprintf(" (the kernel command line has %s)", strings.Join(p.IOMMUKernelArgs, " "))
		}
		out = append(out, api.Blocker{Code: api.BlockerIOMMUDisabled, Message: msg})
	}
	if !p.KVM {
		msg := "/dev/kvm does not exist: load kvm_intel or kvm_amd and enable VT-x/AMD-V in the firmware"
		out = append(out, api.Blocker{Code: api.BlockerKVMMissing, Message: msg, Device: "/dev/kvm"})
	}
	for _, m := range vfioModules {
		if !slices.Contains(p.Modules, m) {
			out = append(out, api.Blocker{Code: api.BlockerVFIOModulesMissing, Device: m,
				Message: fmt.Sprintf("kernel module %s is not loaded: modprobe %s and add it to /etc/modules-load.d", m, m)})
		}
	}
	for _, c := range sliceCommands {
		if p.Commands[c] == "" {
			out = append(out, api.Blocker{Code: api.BlockerCommandMissing, Device: c,
				Message: fmt.Sprintf("%s is not on PATH", c)})
		}
	}
	if p.Commands[seedTools[0]] == "" && p.Commands[seedTools[1]] == "" {
		out = append(out, api.Blocker{Code: api.BlockerCommandMissing, Device: seedTools[0],
			Message: fmt.Sprintf("neither %s nor %s is on PATH: cloud-init seeds cannot be made", seedTools[0], seedTools[1])})
	}
	return out
}
