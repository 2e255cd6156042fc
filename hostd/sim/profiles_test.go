package sim

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

func TestSpecs(t *testing.T) {
	fleet := DevFleet()
	tests := []struct {
		name      string
		spec      api.NodeSpec
		wantShape string
		wantModel string
	}{
		{"SliceHost", SliceHost("s1", "H200"), api.ShapeGPUSlice, "H200"},
		{"BaremetalHost", BaremetalHost("b1", "H100"), api.ShapeBaremetal, "H100"},
		{"DevFleet slice", fleet[0], api.ShapeGPUSlice, "H200"},
		{"DevFleet bare metal", fleet[1], api.ShapeBaremetal, "H100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.spec
			if s.Shape != tt.wantShape || s.GPUModel != tt.wantModel {
				t.Errorf("shape, model = %s, %s; want %s, %s", s.Shape, s.GPUModel, tt.wantShape, tt.wantModel)
			}
			if len(s.Slots) != 8 {
				t.Fatalf("got %d slots; want 8", len(s.Slots))
			}
			perNUMA := map[int]int{}
			seen := map[string]bool{}
			for i, sl := range s.Slots {
				perNUMA[sl.NUMANode]++
				if sl.GPUPCI == "" || sl.FabricVF == "" || !strings.HasPrefix(sl.NVMe, "/dev/disk/by-id/nvme-") {
					t.Errorf("slot %d = %+v; want a GPU, a by-id NVMe path and a VF", i, sl)
				}
				for _, v := range []string{sl.GPUPCI, sl.NVMe, sl.FabricVF} {
					if seen[v] {
						t.Errorf("slot %d: %s used twice", i, v)
					}
					seen[v] = true
				}
			}
			if perNUMA[0] != 4 || perNUMA[1] != 4 {
				t.Errorf("slots per NUMA node = %v; want 4 on 0 and 4 on 1", perNUMA)
			}
		})
	}
	if fleet[0].Name == fleet[1].Name {
		t.Errorf("DevFleet names are both %q", fleet[0].Name)
	}
	if a, b := SliceHost("a", "H200").Slots[0].NVMe, SliceHost("b", "H200").Slots[0].NVMe; a == b {
		t.Errorf("hosts a and b share NVMe serial %s", a)
	}
}

func TestSlotsFollowNUMA(t *testing.T) {
	for _, p := range []Profile{H200Slice8(), H100Baremetal8()} {
		numaOf := map[string]int{}
		for _, n := range p.NVMe {
			numaOf[n.ByID()] = n.NUMANode
		}
		for _, v := range p.VFs {
			numaOf[v.PCI] = v.NUMANode
		}
		for _, s := range p.Slots() {
			if numaOf[s.NVMe] != s.NUMANode || numaOf[s.FabricVF] != s.NUMANode {
				t.Errorf("%s: slot %+v crosses NUMA nodes", p.Name, s)
			}
		}
	}
}

func TestKnobsCopy(t *testing.T) {
	p := H200Slice8()
	_ = p.BindGPU(p.GPUs[0].PCI, "nvidia").DropLastNVMe(0).DropLastVF(1).WithoutCommand("virsh").
		ShareIOMMUGroup(p.GPUs[1].PCI, p.Other[0].PCI)
	q := H200Slice8()
	if p.GPUs[0].Driver != q.GPUs[0].Driver || len(p.NVMe) != len(q.NVMe) || len(p.VFs) != len(q.VFs) ||
		len(p.Commands) != len(q.Commands) || p.Other[0].IOMMUGroup != q.Other[0].IOMMUGroup {
		t.Error("a knob changed the profile it was called on")
	}
}

func TestWriteTreeLayout(t *testing.T) {
	root := t.TempDir()
	p := H200Slice8()
	if err := WriteTree(root, p); err != nil {
		t.Fatal(err)
	}
	gpu := p.GPUs[0]
	dev := filepath.Join(root, "sys/bus/pci/devices", gpu.PCI)
	links := []struct{ name, want string }{
		{filepath.Join(dev, "iommu_group"), "../../../../kernel/iommu_groups/" + strconv.Itoa(gpu.IOMMUGroup)},
		{filepath.Join(dev, "driver"), "../../../../bus/pci/drivers/vfio-pci"},
		{filepath.Join(root, "sys/bus/pci/devices", p.VFs[0].PCI, "physfn"), "../" + p.VFs[0].PF},
		{filepath.Join(root, "dev/disk/by-id", p.NVMe[1].ByIDName()), "../../" + p.NVMe[1].Namespace()},
		{filepath.Join(root, "sys/class/nvme/nvme1/device"), "../../../" + p.NVMe[1].PCI},
	}
	for _, l := range links {
		got, err := os.Readlink(l.name)
		if err != nil || got != l.want {
			t.Errorf("readlink %s = %q, %v; want %q", strings.TrimPrefix(l.name, root), got, err, l.want)
		}
	}
	files := []struct{ name, want string }{
		{filepath.Join(dev, "vendor"), "0x10de\n"},
		{filepath.Join(dev, "device"), "0x2335\n"},
		{filepath.Join(dev, "class"), "0x030200\n"},
		{filepath.Join(root, "sys/class/nvme/nvme1/device/class"), "0x010802\n"},
		{filepath.Join(root, "sys/kernel/iommu_groups", strconv.Itoa(gpu.IOMMUGroup), "devices", gpu.PCI, "numa_node"), "0\n"},
	}
	for _, f := range files {
		b, err := os.ReadFile(f.name)
		if err != nil || string(b) != f.want {
			t.Errorf("read %s = %q, %v; want %q", strings.TrimPrefix(f.name, root), b, err, f.want)
		}
	}
	if err := WriteTree(root, p); err == nil {
		t.Error("WriteTree over an existing tree succeeded; want an error")
	}
}
