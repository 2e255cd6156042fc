package topology

import (
	"bufio"
	"bytes"
	"cmp"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
)

var (
	// nvme0n1: a namespace without native multipath.
	namespaceRe = regexp.MustCompile(`^nvme(\d+)n(\d+)$`)
	// nvme0c1n1: the hidden path of a multipath namespace; its block
	// device is nvme<subsystem>n<ns>, nvme0n1.
	pathRe = regexp.MustCompile(`^nvme(\d+)c\d+n(\d+)$`)
	ctrlRe = regexp.MustCompile(`^nvme\d+$`)
)

const byIDDir = "disk/by-id"

// scanNVMe lists the NVMe namespaces of PCIe controllers, sorted by
// controller address and name.
func scanNVMe(h Host, numa func(int) int) []api.NVMeInfo {
	ctrls, _ := fs.ReadDir(h.Sys, "class/nvme") // absent without the nvme driver
	byID := byIDLinks(h.Dev)
	busy := busyDevices(h.Proc)
	seen := map[string]bool{}
	var out []api.NVMeInfo
	for _, c := range ctrls {
		if !ctrlRe.MatchString(c.Name()) {
			continue
		}
		dir := "class/nvme/" + c.Name()
		if t := readString(h.Sys, dir+"/transport"); t != "" && t != "pcie" {
			continue // NVMe over fabrics: not a local disk
		}
		pci := strings.ToLower(linkBase(h.Sys, dir+"/device"))
		model, serial := readString(h.Sys, dir+"/model"), readString(h.Sys, dir+"/serial")
		node := numa(readInt(h.Sys, dir+"/device/numa_node", -1))
		entries, _ := fs.ReadDir(h.Sys, dir)
		for _, e := range entries {
			ns := namespaceName(e.Name())
			if ns == "" || seen[ns] {
				continue
			}
			seen[ns] = true
			out = append(out, api.NVMeInfo{
				Name: ns, Controller: c.Name(), PCI: pci, NUMANode: node, Model: model, Serial: serial,
				SizeBytes: int64(readInt(h.Sys, "block/"+ns+"/size", 0)) * 512,
				ByID:      pickByID(byID[ns], "nvme-"+udevSafe(model)+"_"+udevSafe(serial)),
				InUse:     inUse(h.Sys, ns, busy),
			})
		}
	}
	slices.SortFunc(out, func(a, b api.NVMeInfo) int {
		return cmp.Or(strings.Compare(a.PCI, b.PCI), strings.Compare(a.Name, b.Name))
	})
	return out
}

// namespaceName is the block device of a namespace entry in a
// controller's sysfs directory, or "" for other entries.
func namespaceName(entry string) string {
	if namespaceRe.MatchString(entry) {
		return entry
	}
	if m := pathRe.FindStringSubmatch(entry); m != nil {
		return "nvme" + m[1] + "n" + m[2]
	}
	return ""
}

// byIDLinks maps block device names to the by-id names that point at them.
func byIDLinks(dev fs.FS) map[string][]string {
	entries, err := fs.ReadDir(dev, byIDDir)
	if err != nil {
		return nil
	}
	out := map[string][]string{}
	for _, e := range entries {
		if t := linkBase(dev, byIDDir+"/"+e.Name()); t != "" {
			out[t] = append(out[t], e.Name())
		}
	}
	return out
}

// pickByID chooses a namespace's stable path: udev's
// nvme-<model>_<serial> when it points at this namespace, else the
// shortest other model/serial name (nvme-<model>_<serial>_<nsid> on
// drives with several namespaces), else the EUI name.
func pickByID(names []string, want string) string {
	if len(names) == 0 {
		return ""
	}
	if slices.Contains(names, want) {
		return "/dev/" + byIDDir + "/" + want
	}
	names = slices.Clone(names)
	eui := func(n string) bool {
		return strings.HasPrefix(n, "nvme-eui.") || strings.HasPrefix(n, "nvme-nvme.") || strings.HasPrefix(n, "nvme-uuid.")
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(compareBool(eui(a), eui(b)), cmp.Compare(len(a), len(b)), strings.Compare(a, b))
	})
	return "/dev/" + byIDDir + "/" + names[0]
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// udevSafe turns whitespace into "_" as udev does for by-id names.
func udevSafe(s string) string { return strings.Join(strings.Fields(s), "_") }

// busyDevices are the block devices mounted or used as swap.
func busyDevices(proc fs.FS) map[string]bool {
	out := map[string]bool{}
	for _, name := range []string{"mounts", "swaps"} {
		b, err := fs.ReadFile(proc, name)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) > 0 && strings.HasPrefix(f[0], "/dev/") {
				out[path.Base(f[0])] = true
			}
		}
	}
	return out
}

// inUse reports whether a namespace or one of its partitions is mounted,
// swap, or held by another block device (LVM, md, dm-crypt).
func inUse(sys fs.FS, ns string, busy map[string]bool) bool {
	if busy[ns] || held(sys, "block/"+ns) {
		return true
	}
	entries, _ := fs.ReadDir(sys, "block/"+ns)
	for _, e := range entries {
		p := e.Name()
		if !strings.HasPrefix(p, ns+"p") || !exists(sys, "block/"+ns+"/"+p+"/partition") {
			continue
		}
		if busy[p] || held(sys, "block/"+ns+"/"+p) {
			return true
		}
	}
	return false
}

func held(sys fs.FS, dir string) bool {
	h, _ := fs.ReadDir(sys, dir+"/holders")
	return len(h) > 0
}
