package workload

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gpuTree writes the driver's records and device nodes (empty files) of
// GPUs pci→minor under a new root, as a node (or the sim) shows them.
func gpuTree(t *testing.T, gpus map[string]int, control ...string) string {
	t.Helper()
	root := t.TempDir()
	for pci, minor := range gpus {
		dir := filepath.Join(root, "proc/driver/nvidia/gpus", pci)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		info := fmt.Sprintf("Model: \t\t NVIDIA H100\nGPU UUID: \t GPU-%d\nBus Location: \t %s\nDevice Minor: \t %d\n", minor, pci, minor)
		if err := os.WriteFile(filepath.Join(dir, "information"), []byte(info), 0o444); err != nil {
			t.Fatal(err)
		}
		control = append(control, fmt.Sprintf("nvidia%d", minor))
	}
	if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range control {
		if err := os.WriteFile(filepath.Join(root, "dev", n), nil, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestNodeGPUsReadsTheDriversRecords(t *testing.T) {
	root := gpuTree(t, map[string]int{"0000:b8:00.0": 1, "0000:18:00.0": 0, "0000:db:00.0": 7})
	got, err := NodeGPUs(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []GPUDevice{{"0000:18:00.0", "GPU-0", 0}, {"0000:b8:00.0", "GPU-1", 1}, {"0000:db:00.0", "GPU-7", 7}}
	if !slices.Equal(got, want) {
		t.Errorf("got %v; want %v", got, want)
	}
	if got, err := NodeGPUs(t.TempDir()); err != nil || got != nil {
		t.Errorf("a node without the driver: %v, %v; want none, no error", got, err)
	}
	bad := gpuTree(t, map[string]int{"0000:18:00.0": 0})
	f := filepath.Join(bad, "proc/driver/nvidia/gpus/0000:18:00.0/information")
	_ = os.Chmod(f, 0o644)
	if err := os.WriteFile(f, []byte("Device Minor: \t x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NodeGPUs(bad); err == nil || !strings.Contains(err.Error(), "device minor") {
		t.Errorf("a record with a bad minor: %v; want refused", err)
	}
}

// TestPrepareGPUsWritesOnlyTheAllocationsGPUs: the spec names the GPUs
// asked for (by PCI address in any case, or UUID) and the control nodes
// the node has, each bound from the tree at /dev/<name>; none asked is
// every GPU of the node; a node without GPUs gets no spec (an old one
// goes).
func TestPrepareGPUsWritesOnlyTheAllocationsGPUs(t *testing.T) {
	root := gpuTree(t, map[string]int{"0000:18:00.0": 0, "0000:2a:00.0": 1, "0000:3a:00.0": 2}, "nvidiactl", "nvidia-uvm")
	dir := t.TempDir()
	names, err := PrepareGPUs(root, dir, "a-1", []string{"0000:3A:00.0", "GPU-0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"gpuaas.io/gpu=a-1-2", "gpuaas.io/gpu=a-1-0"}; !slices.Equal(names, want) {
		t.Errorf("names %v; want %v", names, want)
	}
	spec := readSpec(t, CDISpecPath(dir, "a-1"))
	if spec.Kind != CDIKind || spec.Version != cdiVersion {
		t.Errorf("kind %q version %q", spec.Kind, spec.Version)
	}
	var devs []string
	for _, d := range spec.Devices {
		for _, m := range d.ContainerEdits.Mounts {
			devs = append(devs, d.Name+" "+strings.TrimPrefix(m.HostPath, root)+"→"+m.ContainerPath)
		}
	}
	if want := []string{"a-1-2 /dev/nvidia2→/dev/nvidia2", "a-1-0 /dev/nvidia0→/dev/nvidia0"}; !slices.Equal(devs, want) {
		t.Errorf("devices %v; want %v", devs, want)
	}
	var common []string
	for _, m := range spec.ContainerEdits.Mounts {
		common = append(common, m.ContainerPath)
	}
	if want := []string{"/dev/nvidiactl", "/dev/nvidia-uvm"}; !slices.Equal(common, want) {
		t.Errorf("common nodes %v; want %v (nvidia-uvm-tools is absent)", common, want)
	}

	all, err := PrepareGPUs(root, dir, "a-2", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"gpuaas.io/gpu=a-2-0", "gpuaas.io/gpu=a-2-1", "gpuaas.io/gpu=a-2-2"}; !slices.Equal(all, want) {
		t.Errorf("none asked: %v; want every GPU %v", all, want)
	}

	if _, err := PrepareGPUs(root, dir, "a-1", []string{"0000:ee:00.0"}, nil); err == nil || !strings.Contains(err.Error(), "0000:ee:00.0") {
		t.Errorf("a GPU not on the node: %v; want refused naming it", err)
	}
	names, err = PrepareGPUs(t.TempDir(), dir, "a-1", nil, nil)
	if err != nil || names != nil {
		t.Fatalf("no GPUs: %v, %v", names, err)
	}
	if _, err := os.Stat(CDISpecPath(dir, "a-1")); !os.IsNotExist(err) {
		t.Errorf("spec of a node without GPUs: %v; want none", err)
	}
}

func readSpec(t *testing.T, path string) CDISpec {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s CDISpec
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// nvidiaCTKSpec is a spec as `nvidia-ctk cdi generate` writes it (index
// names, an "all" device, common edits), for four GPUs.
const nvidiaCTKSpec = `---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: "1"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia1
- name: "3"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia3
- name: all
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
    - path: /dev/nvidia1
    - path: /dev/nvidia3
containerEdits:
  deviceNodes:
  - path: /dev/nvidiactl
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05
    options: [ro, nosuid, nodev, bind]
`

// TestNVIDIASpecNamesTheAllocationsGPUs: where NVIDIA's toolkit wrote a
// spec, each GPU is its device whose only node is /dev/nvidia<minor>
// (never "all"); a GPU the spec lacks means hostd's own spec; other
// vendors' specs, hostd's own and unreadable files are passed over; a
// sim's GPUs never take NVIDIA's names.
func TestNVIDIASpecNamesTheAllocationsGPUs(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"nvidia.yaml":     nvidiaCTKSpec,
		"other.json":      `{"cdiVersion":"0.5.0","kind":"example.com/fpga","devices":[{"name":"0","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia0"}]}}]}`,
		"gpuaas-a-9.json": `{"cdiVersion":"0.5.0","kind":"nvidia.com/gpu","devices":[{"name":"x","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia2"}]}}]}`,
		"broken.yaml":     "kind: [",
		"README":          "not a spec",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dirs := []string{filepath.Join(dir, "absent"), dir}
	names, found, err := nvidiaNames(dirs, []GPUDevice{{Minor: 3}, {Minor: 0}})
	if err != nil || !found || !slices.Equal(names, []string{"nvidia.com/gpu=3", "nvidia.com/gpu=0"}) {
		t.Errorf("got %v %v %v; want nvidia.com/gpu=3 and =0", names, found, err)
	}
	if names, found, err := nvidiaNames(dirs, []GPUDevice{{Minor: 1}, {Minor: 2}}); err != nil || found {
		t.Errorf("a GPU the spec lacks: %v %v %v; want not found", names, found, err)
	}
	root := gpuTree(t, map[string]int{"0000:18:00.0": 0})
	got, err := PrepareGPUs(root, t.TempDir(), "a-1", nil, dirs)
	if err != nil || !slices.Equal(got, []string{"gpuaas.io/gpu=a-1-0"}) {
		t.Errorf("a sim's GPU: %v %v; want hostd's own device", got, err)
	}
}
