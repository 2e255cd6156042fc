package workload

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/fsutil"
)

// GPUs reach a container through the Container Device Interface
// (https://github.com/cncf-tags/container-device-interface, SPEC.md): hostd
// writes a spec naming the allocation's GPUs only, and the container is
// run with `--device KIND=NAME` for each of them, so that the container
// gets exactly its allocation's GPUs (docs/apps.md, "GPUs";
// docs/decisions/0036-gpus-in-containers.md).

// CDIDir is where hostd writes its specs: the runtime spec directory that
// podman 4.3 reads (it reads /etc/cdi and /var/run/cdi, and no other).
const CDIDir = "/var/run/cdi"

// CDIKind is the kind (vendor/class) of the devices hostd's specs name.
const CDIKind = "gpuaas.io/gpu"

// cdiVersion is the spec version hostd writes: the newest podman 4.3's
// CDI library (v0.5) reads.
const cdiVersion = "0.5.0"

// GPUDevice is a GPU on the NVIDIA driver, as the driver's records show
// it (/proc/driver/nvidia/gpus/<pci>/information).
type GPUDevice struct {
	PCI   string // 0000:18:00.0
	UUID  string
	Minor int // its device node is /dev/nvidia<Minor>
}

// NodeGPUs reads the GPUs on the driver from the records under root ("/"
// on a real node; a sim host's tree), in PCI order. None is not an error:
// a node without the driver has no GPU for a container.
func NodeGPUs(root string) ([]GPUDevice, error) {
	dir := filepath.Join(root, "proc", "driver", "nvidia", "gpus")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("gpu records: %w", err)
	}
	var gpus []GPUDevice
	for _, e := range ents {
		g, err := readGPURecord(filepath.Join(dir, e.Name(), "information"))
		if err != nil {
			return nil, err
		}
		g.PCI = strings.ToLower(e.Name())
		gpus = append(gpus, g)
	}
	slices.SortFunc(gpus, func(a, b GPUDevice) int { return strings.Compare(a.PCI, b.PCI) })
	return gpus, nil
}

// readGPURecord reads a GPU's "Device Minor:" and "GPU UUID:".
func readGPURecord(path string) (GPUDevice, error) {
	f, err := os.Open(path)
	if err != nil {
		return GPUDevice{}, fmt.Errorf("gpu record: %w", err)
	}
	defer f.Close()
	g := GPUDevice{Minor: -1}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "Device Minor":
			if g.Minor, err = strconv.Atoi(strings.TrimSpace(v)); err != nil || g.Minor < 0 {
				return GPUDevice{}, fmt.Errorf("gpu record %s: device minor %q", path, strings.TrimSpace(v))
			}
		case "GPU UUID":
			g.UUID = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return GPUDevice{}, fmt.Errorf("gpu record %s: %w", path, err)
	}
	if g.Minor < 0 {
		return GPUDevice{}, fmt.Errorf("gpu record %s: no device minor", path)
	}
	return g, nil
}

// SelectGPUs returns the GPUs of the node named by want (PCI addresses,
// any case; UUIDs also match). A GPU the node does not have is refused:
// a container never runs with fewer GPUs than its allocation has.
func SelectGPUs(node []GPUDevice, want []string) ([]GPUDevice, error) {
	var out []GPUDevice
	for _, w := range want {
		i := slices.IndexFunc(node, func(g GPUDevice) bool {
			return strings.EqualFold(g.PCI, w) || (g.UUID != "" && g.UUID == w)
		})
		if i < 0 {
			return nil, api.Errorf(api.CodeInvalidArgument, "gpu %q: not a GPU on this node's driver", w)
		}
		if !slices.ContainsFunc(out, func(g GPUDevice) bool { return g.PCI == node[i].PCI }) {
			out = append(out, node[i])
		}
	}
	return out, nil
}

// CDISpec is a CDI spec, the fields hostd writes (SPEC.md).
type CDISpec struct {
	Version        string      `json:"cdiVersion"`
	Kind           string      `json:"kind"`
	Devices        []CDIDevice `json:"devices"`
	ContainerEdits CDIEdits    `json:"containerEdits,omitzero"`
}

// CDIDevice is one device of a spec.
type CDIDevice struct {
	Name           string   `json:"name"`
	ContainerEdits CDIEdits `json:"containerEdits"`
}

// CDIEdits are what a device adds to a container.
type CDIEdits struct {
	DeviceNodes []CDIDeviceNode `json:"deviceNodes,omitempty"`
	Mounts      []CDIMount      `json:"mounts,omitempty"`
}

// CDIDeviceNode is a device node, at Path in the container and on the
// host.
type CDIDeviceNode struct {
	Path string `json:"path"`
}

// CDIMount is a bind mount of HostPath at ContainerPath.
type CDIMount struct {
	HostPath      string   `json:"hostPath"`
	ContainerPath string   `json:"containerPath"`
	Options       []string `json:"options,omitempty"`
}

// controlNodes are the driver's nodes every GPU container needs, those
// the node has.
var controlNodes = []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}

// GPUSpec is allocation allocID's spec for gpus, the device nodes under
// root/dev ("/" on a real node), and the qualified names to run the
// container with (KIND=ALLOC-MINOR). A node at its container's path
// (/dev/nvidia0 on a real node) is a device node, which runc bind-mounts
// into a rootless container; a node elsewhere (a sim tree) is a bind
// mount at /dev/nvidia<minor>: rootless runc can only bind-mount a
// device node from the same path on the host.
func GPUSpec(root, allocID string, gpus []GPUDevice) (CDISpec, []string, error) {
	spec := CDISpec{Version: cdiVersion, Kind: CDIKind}
	edit := func(name string) (CDIEdits, error) {
		// The node itself: a sim's tree names its nodes by symlink.
		host, err := filepath.EvalSymlinks(filepath.Join(root, "dev", name))
		if err != nil {
			return CDIEdits{}, fmt.Errorf("gpu device node: %w", err)
		}
		ctr := "/dev/" + name
		if host == ctr {
			return CDIEdits{DeviceNodes: []CDIDeviceNode{{Path: ctr}}}, nil
		}
		return CDIEdits{Mounts: []CDIMount{{HostPath: host, ContainerPath: ctr, Options: []string{"bind", "nosuid", "noexec"}}}}, nil
	}
	var names []string
	for _, g := range gpus {
		e, err := edit(fmt.Sprintf("nvidia%d", g.Minor))
		if err != nil {
			return CDISpec{}, nil, err
		}
		name := fmt.Sprintf("%s-%d", allocID, g.Minor)
		spec.Devices = append(spec.Devices, CDIDevice{Name: name, ContainerEdits: e})
		names = append(names, CDIKind+"="+name)
	}
	if len(gpus) == 0 {
		return spec, nil, nil
	}
	for _, n := range controlNodes {
		e, err := edit(n)
		if errors.Is(err, os.ErrNotExist) {
			continue // nvidia-uvm is loaded on demand on some nodes
		}
		if err != nil {
			return CDISpec{}, nil, err
		}
		spec.ContainerEdits.DeviceNodes = append(spec.ContainerEdits.DeviceNodes, e.DeviceNodes...)
		spec.ContainerEdits.Mounts = append(spec.ContainerEdits.Mounts, e.Mounts...)
	}
	return spec, names, nil
}

// CDISpecPath is allocation allocID's spec file in dir.
func CDISpecPath(dir, allocID string) string {
	return filepath.Join(dir, "gpuaas-"+allocID+".json")
}

// WriteCDISpec writes allocation allocID's spec into dir, replacing it
// whole (readable by the allocation's podman: it names host paths only).
func WriteCDISpec(dir, allocID string, spec CDISpec) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cdi spec: %w", err)
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("cdi spec: %w", err)
	}
	if err := fsutil.WriteFile(CDISpecPath(dir, allocID), b, 0o644, fsutil.Synced); err != nil {
		return fmt.Errorf("cdi spec: %w", err)
	}
	return nil
}

// RemoveCDISpec removes allocation allocID's spec (at release); none is
// not an error.
func RemoveCDISpec(dir, allocID string) error {
	err := os.Remove(CDISpecPath(dir, allocID))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cdi spec: %w", err)
	}
	return nil
}

// PrepareGPUs writes allocation allocID's spec into dir for the GPUs of
// want (none: every GPU on the node's driver) found under root, and
// returns the CDI device names to run its container with. A node without
// GPUs gets no spec and no device. On a real node (root "/") whose
// NVIDIA container toolkit wrote a spec of its GPUs into one of
// nvidiaDirs, NVIDIA's devices for them are used instead (cdi_nvidia.go),
// and hostd writes none.
func PrepareGPUs(root, dir, allocID string, want []string, nvidiaDirs []string) ([]string, error) {
	if root == "" {
		root = "/"
	}
	gpus, err := NodeGPUs(root)
	if err != nil {
		return nil, err
	}
	if len(want) > 0 {
		if gpus, err = SelectGPUs(gpus, want); err != nil {
			return nil, err
		}
	}
	if len(gpus) == 0 {
		return nil, RemoveCDISpec(dir, allocID)
	}
	if root == "/" {
		// A sim's GPUs are never the machine's: only a real node's are
		// in NVIDIA's spec.
		names, found, err := nvidiaNames(nvidiaDirs, gpus)
		if err != nil {
			return nil, err
		}
		if found {
			return names, RemoveCDISpec(dir, allocID)
		}
	}
	spec, names, err := GPUSpec(root, allocID, gpus)
	if err != nil {
		return nil, err
	}
	if err := WriteCDISpec(dir, allocID, spec); err != nil {
		return nil, err
	}
	return names, nil
}
