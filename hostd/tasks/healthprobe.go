package tasks

import (
	"bufio"
	"bytes"
	"context"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaas/gpuaas/hostd/topology"
	"github.com/gpuaas/gpuaas/internal/api"
)

// PhaseProbe is the one phase of diag.health_probe.
const PhaseProbe = "probe"

// HealthReport is what diag.health_probe reports: the host facts that
// decide whether it can serve, read from sysfs and procfs.
type HealthReport struct {
	Kernel             string `json:"kernel"`
	MemoryMiB          int64  `json:"memory_mib"`
	MemoryAvailableMiB int64  `json:"memory_available_mib"`
	// KVM is set when /dev/kvm exists.
	KVM         bool         `json:"kvm"`
	IOMMUGroups int          `json:"iommu_groups"`
	VFIO        VFIOHealth   `json:"vfio"`
	GPUs        GPUHealth    `json:"gpus"`
	Fabric      FabricHealth `json:"fabric"`
	// Problems are facts that stop the host serving any shape.
	Problems []string `json:"problems,omitempty"`
	// VolumeFreeBytes is the room the node has for new volumes
	// (controld/volumes admits sizes by it); absent on a node that keeps
	// none.
	VolumeFreeBytes *int64 `json:"volume_free_bytes,omitempty"`
	// Volumes are the ids of the volumes the node holds; absent when it
	// keeps none or could not list them (volume_inventory.go).
	Volumes *[]string `json:"volumes,omitempty"`
	// VolumeSessions are the ids of the volumes mounted for an sftp
	// session now (volume.InSession); absent as Volumes is.
	VolumeSessions *[]string `json:"volume_sessions,omitempty"`
	// SliceVolumes says the node's slices are real VMs that take volumes
	// as disks (vmprovision_volumes.go); controld refuses a slice with a
	// volume on a node that does not say so.
	SliceVolumes bool `json:"slice_volumes,omitempty"`
}

// VFIOHealth is the state of the VFIO stack.
type VFIOHealth struct {
	// Modules maps vfio, vfio_pci and vfio_iommu_type1 to whether loaded.
	Modules map[string]bool `json:"modules"`
	Device  bool            `json:"device"` // /dev/vfio/vfio exists
}

// GPUHealth counts the NVIDIA GPUs by model and by bound driver ("none"
// for unbound).
type GPUHealth struct {
	Count   int            `json:"count"`
	Models  map[string]int `json:"models,omitempty"`
	Drivers map[string]int `json:"drivers,omitempty"`
}

// FabricHealth counts the Mellanox VFs and gives each physical function's
// link state.
type FabricHealth struct {
	VFs     int            `json:"vfs"`
	Drivers map[string]int `json:"drivers,omitempty"`
	PFs     []FabricPF     `json:"pfs,omitempty"`
}

// FabricPF is one physical function with VFs.
type FabricPF struct {
	PCI string `json:"pci"`
	VFs int    `json:"vfs"`
	// Link is the operstate of its network interfaces ("up", "down"),
	// "unknown" when sysfs shows none.
	Link string `json:"link"`
}

var vfioModuleNames = []string{"vfio", "vfio_pci", "vfio_iommu_type1"}

func healthProbe(ctx context.Context, env *Env, _ struct{}, rep Reporter) (any, error) {
	var r HealthReport
	err := NewPhased(env, rep).Run(ctx, PhaseProbe, func(context.Context) error {
		var err error
		r, err = ProbeHealth(env)
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ProbeHealth reads the host's health; hostd may also call it for
// heartbeats.
func ProbeHealth(env *Env) (HealthReport, error) {
	name := env.NodeName
	if name == "" {
		name = "localhost"
	}
	// The slice shape makes discovery look at everything; its blockers
	// are not the probe's business.
	t, err := topology.Discover(env.Topology, topology.Options{Shape: api.ShapeGPUSlice, HostName: name})
	if err != nil {
		return HealthReport{}, err
	}
	pre := t.Prerequisites
	r := HealthReport{
		Kernel: t.Kernel, MemoryMiB: t.MemoryMiB, MemoryAvailableMiB: memAvailableMiB(env.Topology.Proc),
		KVM: pre.KVM, IOMMUGroups: pre.IOMMUGroups,
		VFIO: VFIOHealth{Modules: map[string]bool{}, Device: pre.VFIODevice},
		GPUs: GPUHealth{Count: len(t.GPUs)}, Fabric: FabricHealth{VFs: len(t.FabricVFs)},
	}
	for _, m := range vfioModuleNames {
		r.VFIO.Modules[m] = slices.Contains(pre.Modules, m)
	}
	count := func(m *map[string]int, k string) {
		if *m == nil {
			*m = map[string]int{}
		}
		if k == "" {
			k = "none"
		}
		(*m)[k]++
	}
	for _, g := range t.GPUs {
		count(&r.GPUs.Models, g.Model)
		count(&r.GPUs.Drivers, g.Driver)
	}
	pfVFs := map[string]int{}
	var pfs []string
	for _, v := range t.FabricVFs {
		count(&r.Fabric.Drivers, v.Driver)
		if pfVFs[v.PF] == 0 {
			pfs = append(pfs, v.PF)
		}
		pfVFs[v.PF]++
	}
	for _, pf := range pfs {
		r.Fabric.PFs = append(r.Fabric.PFs, FabricPF{PCI: pf, VFs: pfVFs[pf], Link: linkState(env.Topology.Sys, pf)})
	}
	if r.Kernel == "" {
		r.Problems = append(r.Problems, "kernel release unreadable")
	}
	if r.GPUs.Count == 0 {
		r.Problems = append(r.Problems, "no NVIDIA GPU found")
	}
	r.VolumeFreeBytes = volumeFree(env)
	r.Volumes, r.VolumeSessions = volumeInventory(env)
	r.SliceVolumes = sliceVolumes(env)
	return r, nil
}

// memAvailableMiB reads MemAvailable from meminfo.
func memAvailableMiB(proc fs.FS) int64 {
	b, err := fs.ReadFile(proc, "meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// linkState is "up" if any network interface of the PCI function is up,
// else the first one's operstate, else "unknown".
func linkState(sys fs.FS, pci string) string {
	dir := "bus/pci/devices/" + pci + "/net"
	ifaces, err := fs.ReadDir(sys, dir)
	if err != nil || len(ifaces) == 0 {
		return "unknown"
	}
	state := ""
	for _, i := range ifaces {
		b, err := fs.ReadFile(sys, dir+"/"+i.Name()+"/operstate")
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "up" {
			return s
		}
		if state == "" {
			state = s
		}
	}
	if state == "" {
		return "unknown"
	}
	return state
}
