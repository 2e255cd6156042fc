package sim

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// WriteTree writes the profile under root as the kernel would show it:
// root/sys, root/dev and root/proc. root should be empty or absent.
//
// Layout (relative symlinks computed the way sysfs computes them):
//
//	sys/devices/pci0000:<rb>/<root port>/<addr>/{vendor,device,class,numa_node,local_cpulist,...}
//	    .../iommu_group -> sys/kernel/iommu_groups/<n>   (unless IOMMUOff)
//	    .../driver      -> sys/bus/pci/drivers/<driver>
//	    .../physfn (VFs), virtfn<k> (PFs)
//	    .../nvme/nvme<i>/{model,serial,device,nvme<i>n1/{size,holders/,nvme<i>n1p<k>/}}
//	sys/bus/pci/devices/<addr> -> the device
//	sys/bus/pci/drivers/<driver>/<addr> -> the device
//	sys/kernel/iommu_groups/<n>/devices/<addr> -> the device
//	sys/class/nvme/nvme<i>, sys/block/nvme<i>n1, sys/class/block/...
//	sys/devices/system/node/node<n>/{cpulist,meminfo}
//	sys/module/<module>/initstate
//	dev/{kvm,vfio/vfio,vfio/<group>,nvme<i>,nvme<i>n1,disk/by-id/...}
//	proc/{cmdline,meminfo,mounts,swaps,sys/kernel/osrelease}
func WriteTree(root string, p Profile) error {
	w := &tree{root: root, p: p}
	w.pci()
	w.nvme()
	w.numa()
	w.modules()
	w.proc()
	if !p.NoKVM {
		w.file("dev/kvm", "")
	}
	if !p.NoVFIOModules {
		w.file("dev/vfio/vfio", "")
	}
	if w.err != nil {
		return fmt.Errorf("write sim tree for %s: %w", p.Name, w.err)
	}
	return nil
}

// tree writes files and links under root, keeping the first error.
type tree struct {
	root    string
	p       Profile
	devPath map[string]string // PCI address -> sys/devices/... path
	made    map[string]bool   // directories already made
	err     error
}

// mkdir makes a directory (slash path under root) and its parents once.
func (w *tree) mkdir(dir string) {
	if w.err != nil || w.made[dir] {
		return
	}
	if w.made == nil {
		w.made = map[string]bool{}
	}
	w.err = os.MkdirAll(filepath.Join(w.root, filepath.FromSlash(dir)), 0o755)
	w.made[dir] = true
}

func (w *tree) file(name, content string) {
	if w.err != nil {
		return
	}
	w.mkdir(path.Dir(name))
	if w.err == nil {
		w.err = os.WriteFile(filepath.Join(w.root, filepath.FromSlash(name)), []byte(content), 0o644)
	}
}

func (w *tree) dir(name string) { w.mkdir(name) }

// link makes name a symlink to target (both relative to root), written
// relative to name's directory as sysfs does.
func (w *tree) link(name, target string) {
	if w.err != nil {
		return
	}
	w.mkdir(path.Dir(name))
	if w.err == nil {
		w.err = os.Symlink(relLink(path.Dir(name), target), filepath.Join(w.root, filepath.FromSlash(name)))
	}
}

// relLink is the relative path from dir to target as the kernel's sysfs
// writes it: up to the first ancestor of dir that is also a proper
// ancestor of target, then down. So a link to an ancestor names it
// ("../../../0000:19:00.0"), never just "../..".
func relLink(dir, target string) string {
	under := func(base, p string) bool { return base == "." || p == base || strings.HasPrefix(p, base+"/") }
	base, up := dir, ""
	for !under(base, path.Dir(target)) {
		base, up = path.Dir(base), up+"../"
	}
	if base == "." {
		return up + target
	}
	return up + strings.TrimPrefix(target, base+"/")
}

// pciFunc is one function to write, whatever kind it is.
type pciFunc struct {
	Func
	vendor, device uint16
	class          uint32
	pf             string
}

func (w *tree) pciFuncs() []pciFunc {
	p := w.p
	var fs []pciFunc
	for _, g := range p.GPUs {
		fs = append(fs, pciFunc{Func: g.Func, vendor: VendorNVIDIA, device: g.DeviceID, class: Class3D})
	}
	for _, n := range p.NVMe {
		fs = append(fs, pciFunc{Func: n.Func, vendor: VendorSamsung, device: DevicePM1733, class: ClassNVMe})
	}
	for _, v := range p.VFs {
		fs = append(fs, pciFunc{Func: v.Func, vendor: VendorMellanox, device: DeviceCX7VF, class: ClassEthernet, pf: v.PF})
	}
	for _, d := range p.Other {
		fs = append(fs, pciFunc{Func: d.Func, vendor: d.Vendor, device: d.DeviceID, class: d.Class})
	}
	// One root port per endpoint bus, on the host bridge of the bus's NUMA
	// node, each in an IOMMU group of its own.
	rootBus := map[int]int{}
	for _, nn := range p.NUMANodes {
		rootBus[nn.ID] = nn.RootBus
	}
	maxGroup := 0
	busNUMA := map[string]int{}
	for _, f := range fs {
		maxGroup = max(maxGroup, f.IOMMUGroup)
		busNUMA[busOf(f.PCI)] = f.NUMANode
	}
	port := map[int]int{}
	portVendor, portDevice := uint16(VendorIntel), uint16(deviceRootPortIntel)
	if p.CPUVendor == "amd" {
		portVendor, portDevice = VendorAMD, deviceRootPortAMD
	}
	w.devPath = map[string]string{}
	for _, bus := range slices.Sorted(maps.Keys(busNUMA)) {
		numa := busNUMA[bus]
		rb := rootBus[numa]
		port[numa]++
		addr := fmt.Sprintf("%s:%02x:%02x.0", domainOf(bus), rb, port[numa])
		maxGroup++
		rp := pciFunc{Func: Func{PCI: addr, NUMANode: numa, IOMMUGroup: maxGroup, Driver: "pcieport"},
			vendor: portVendor, device: portDevice, class: ClassPCIPort}
		w.devPath[addr] = fmt.Sprintf("sys/devices/pci%s:%02x/%s", domainOf(bus), rb, addr)
		for _, f := range fs {
			if busOf(f.PCI) == bus {
				w.devPath[f.PCI] = w.devPath[addr] + "/" + f.PCI
			}
		}
		fs = append(fs, rp)
	}
	slices.SortFunc(fs, func(a, b pciFunc) int { return cmp.Compare(a.PCI, b.PCI) })
	return fs
}

func (w *tree) pci() {
	p := w.p
	fs := w.pciFuncs()
	cpus := map[int]string{}
	for _, nn := range p.NUMANodes {
		cpus[nn.ID] = nn.CPUs
	}
	groupType := "DMA-FQ"
	if slices.Contains(p.IOMMUArgs, "iommu=pt") {
		groupType = "identity"
	}
	w.dir("sys/kernel/iommu_groups")
	vfioGroups := map[int]bool{}
	virtfns := map[string]int{}
	for _, f := range fs {
		dp := w.devPath[f.PCI]
		w.file(dp+"/vendor", fmt.Sprintf("0x%04x\n", f.vendor))
		w.file(dp+"/device", fmt.Sprintf("0x%04x\n", f.device))
		w.file(dp+"/subsystem_vendor", fmt.Sprintf("0x%04x\n", f.vendor))
		w.file(dp+"/subsystem_device", fmt.Sprintf("0x%04x\n", f.device))
		w.file(dp+"/class", fmt.Sprintf("0x%06x\n", f.class))
		w.file(dp+"/numa_node", fmt.Sprintf("%d\n", f.NUMANode))
		w.file(dp+"/local_cpulist", cpus[f.NUMANode]+"\n")
		w.file(dp+"/enable", "1\n")
		w.link("sys/bus/pci/devices/"+f.PCI, dp)
		if f.Driver != "" {
			w.link(dp+"/driver", "sys/bus/pci/drivers/"+f.Driver)
			w.link("sys/bus/pci/drivers/"+f.Driver+"/"+f.PCI, dp)
		}
		if !p.IOMMUOff {
			g := fmt.Sprintf("sys/kernel/iommu_groups/%d", f.IOMMUGroup)
			w.file(g+"/type", groupType+"\n")
			w.link(dp+"/iommu_group", g)
			w.link(g+"/devices/"+f.PCI, dp)
			if f.Driver == "vfio-pci" {
				vfioGroups[f.IOMMUGroup] = true
			}
		}
		if f.pf != "" {
			if w.devPath[f.pf] == "" {
				w.err = cmp.Or(w.err, fmt.Errorf("VF %s: no physical function %s", f.PCI, f.pf))
				return
			}
			w.link(dp+"/physfn", w.devPath[f.pf])
			w.link(w.devPath[f.pf]+"/virtfn"+strconv.Itoa(virtfns[f.pf]), dp)
			virtfns[f.pf]++
		}
	}
	for pf, n := range virtfns {
		w.file(w.devPath[pf]+"/sriov_totalvfs", "16\n")
		w.file(w.devPath[pf]+"/sriov_numvfs", fmt.Sprintf("%d\n", n))
	}
	if !p.NoVFIOModules {
		for g := range vfioGroups {
			w.file(fmt.Sprintf("dev/vfio/%d", g), "")
		}
	}
}

func (w *tree) nvme() {
	var mounts []string
	for _, n := range w.p.NVMe {
		if w.devPath[n.PCI] == "" {
			w.err = cmp.Or(w.err, fmt.Errorf("nvme%d: no PCI device %s", n.Instance, n.PCI))
			return
		}
		ctrlName := fmt.Sprintf("nvme%d", n.Instance)
		ctrl := w.devPath[n.PCI] + "/nvme/" + ctrlName
		w.file(ctrl+"/model", n.Model+"\n")
		w.file(ctrl+"/serial", n.Serial+"\n")
		w.file(ctrl+"/firmware_rev", "GDC5902Q\n")
		w.file(ctrl+"/transport", "pcie\n")
		w.file(ctrl+"/address", n.PCI+"\n")
		w.file(ctrl+"/state", "live\n")
		w.link(ctrl+"/device", w.devPath[n.PCI])
		w.link("sys/class/nvme/"+ctrlName, ctrl)
		w.file("dev/"+ctrlName, "")

		ns := n.Namespace()
		nsDir := ctrl + "/" + ns
		w.file(nsDir+"/size", fmt.Sprintf("%d\n", n.SizeBytes/512))
		w.file(nsDir+"/dev", fmt.Sprintf("259:%d\n", n.Instance*8))
		w.dir(nsDir + "/holders")
		w.link(nsDir+"/device", ctrl)
		w.link("sys/block/"+ns, nsDir)
		w.link("sys/class/block/"+ns, nsDir)
		w.file("dev/"+ns, "")

		byID := "dev/disk/by-id/" + n.ByIDName()
		eui := fmt.Sprintf("dev/disk/by-id/nvme-eui.%016x", hash64(n.Serial))
		for _, l := range []string{byID, byID + "_1", eui} {
			w.link(l, "dev/"+ns)
		}
		for _, part := range slices.Sorted(maps.Keys(n.Mounts)) {
			pn := fmt.Sprintf("%sp%d", ns, part)
			w.file(nsDir+"/"+pn+"/partition", fmt.Sprintf("%d\n", part))
			w.dir(nsDir + "/" + pn + "/holders")
			w.link("sys/class/block/"+pn, nsDir+"/"+pn)
			w.file("dev/"+pn, "")
			w.link(fmt.Sprintf("%s-part%d", byID, part), "dev/"+pn)
			fsType := "ext4"
			if strings.HasPrefix(n.Mounts[part], "/boot/efi") {
				fsType = "vfat"
			}
			mounts = append(mounts, fmt.Sprintf("/dev/%s %s %s rw,relatime 0 0\n", pn, n.Mounts[part], fsType))
		}
	}
	slices.Sort(mounts)
	w.file("proc/mounts", "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n"+
		"proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n"+
		"udev /dev devtmpfs rw,nosuid,relatime,mode=755 0 0\n"+strings.Join(mounts, ""))
}

func (w *tree) numa() {
	var ids []string
	for _, nn := range w.p.NUMANodes {
		d := fmt.Sprintf("sys/devices/system/node/node%d", nn.ID)
		kb := nn.MemoryMiB * 1024
		w.file(d+"/cpulist", nn.CPUs+"\n")
		w.file(d+"/meminfo", fmt.Sprintf("Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB\nNode %d MemUsed:        %d kB\n",
			nn.ID, kb, nn.ID, kb*9/10, nn.ID, kb-kb*9/10))
		ids = append(ids, strconv.Itoa(nn.ID))
	}
	online := strings.Join(ids, ",")
	w.file("sys/devices/system/node/online", online+"\n")
	w.file("sys/devices/system/node/possible", online+"\n")
	w.file("sys/devices/system/node/has_cpu", online+"\n")
}

func (w *tree) modules() {
	for _, m := range w.p.Modules {
		if w.p.NoKVM && strings.HasPrefix(m, "kvm") || w.p.NoVFIOModules && strings.HasPrefix(m, "vfio") {
			continue
		}
		w.file("sys/module/"+m+"/initstate", "live\n")
	}
}

func (w *tree) proc() {
	p := w.p
	cmdline := p.Cmdline
	if !p.IOMMUOff && len(p.IOMMUArgs) > 0 {
		cmdline += " " + strings.Join(p.IOMMUArgs, " ")
	}
	w.file("proc/cmdline", cmdline+"\n")
	kb := p.MemoryMiB() * 1024
	w.file("proc/meminfo", fmt.Sprintf("MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\nHugePages_Total:       0\nHugepagesize:       2048 kB\n",
		kb, kb*9/10, kb*9/10))
	w.file("proc/sys/kernel/osrelease", p.Kernel+"\n")
	w.file("proc/swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n")
}

// busOf is the domain:bus of a PCI address, "0000:18".
func busOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i > 0 {
		return addr[:i]
	}
	return addr
}

func domainOf(bus string) string {
	d, _, _ := strings.Cut(bus, ":")
	return d
}

func hash64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}
