package workload

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// NVIDIA's container toolkit writes a CDI spec of a node's GPUs
// (`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`, kind
// nvidia.com/gpu): one device per GPU (named by index, or by UUID), plus
// the driver's user-space libraries, control nodes and hooks as common
// edits. Where a node has it, a container is given NVIDIA's devices for
// its allocation's GPUs rather than hostd's own: it gets CUDA's libraries
// from the node's driver as well (docs/apps.md, "GPUs").

// NVIDIAKind is the kind of NVIDIA's generated specs.
const NVIDIAKind = "nvidia.com/gpu"

// SpecDirs are where CDI specs are read from (podman 4.3's, fixed).
var SpecDirs = []string{"/etc/cdi", CDIDir}

// nvidiaSpec is what hostd reads of a spec: its kind and each device's
// name and device nodes.
type nvidiaSpec struct {
	Kind    string         `yaml:"kind"`
	Devices []nvidiaDevice `yaml:"devices"`
}

type nvidiaDevice struct {
	Name           string `yaml:"name"`
	ContainerEdits struct {
		DeviceNodes []struct {
			Path string `yaml:"path"`
		} `yaml:"deviceNodes"`
	} `yaml:"containerEdits"`
}

// nvidiaNames returns the qualified names of NVIDIA's devices for gpus
// from the first nvidia.com/gpu spec in dirs (YAML or JSON) that has a
// device for each of them: the device whose only node is
// /dev/nvidia<minor>. found is false when no spec has them all.
func nvidiaNames(dirs []string, gpus []GPUDevice) (names []string, found bool, err error) {
	for _, dir := range dirs {
		files, err := os.ReadDir(dir)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("cdi specs: %w", err)
		}
		for _, f := range files {
			ext := filepath.Ext(f.Name())
			if f.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") || strings.HasPrefix(f.Name(), "gpuaas-") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, f.Name()))
			if err != nil {
				return nil, false, fmt.Errorf("cdi specs: %w", err)
			}
			var s nvidiaSpec
			if yaml.Unmarshal(b, &s) != nil || s.Kind != NVIDIAKind {
				continue // another vendor's, or not a spec: not ours to judge
			}
			if names, ok := s.namesFor(gpus); ok {
				return names, true, nil
			}
		}
	}
	return nil, false, nil
}

// namesFor finds each GPU's device in s.
func (s nvidiaSpec) namesFor(gpus []GPUDevice) ([]string, bool) {
	var names []string
	for _, g := range gpus {
		node := fmt.Sprintf("/dev/nvidia%d", g.Minor)
		i := slices.IndexFunc(s.Devices, func(d nvidiaDevice) bool {
			n := d.ContainerEdits.DeviceNodes
			return len(n) == 1 && n[0].Path == node
		})
		if i < 0 {
			return nil, false
		}
		names = append(names, NVIDIAKind+"="+s.Devices[i].Name)
	}
	return names, true
}
