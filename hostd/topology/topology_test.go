package topology_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/topology"
	"github.com/gpuaas/gpuaas/internal/api"
)

// discover writes the profile to a temp dir and discovers it.
func discover(t *testing.T, p sim.Profile) api.TopologyResult {
	t.Helper()
	return discoverWith(t, p, topology.Options{Shape: p.Shape, HostName: p.Name})
}

func discoverWith(t *testing.T, p sim.Profile, opts topology.Options) api.TopologyResult {
	t.Helper()
	root := t.TempDir()
	if err := sim.WriteTree(root, p); err != nil {
		t.Fatal(err)
	}
	r, err := topology.Discover(topology.At(root, p.LookPath), opts)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	return r
}

// slotSpecs strips candidate slots down to what the profile states.
func slotSpecs(slots []api.CandidateSlot) []api.SlotSpec {
	var out []api.SlotSpec
	for _, s := range slots {
		out = append(out, api.SlotSpec{GPUPCI: s.GPUPCI, NVMe: s.NVMe, FabricVF: s.FabricVF, NUMANode: s.NUMANode})
	}
	return out
}

func TestDiscoverProfiles(t *testing.T) {
	t.Parallel()
	for _, p := range []sim.Profile{sim.H200Slice8(), sim.H100Baremetal8()} {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			r := discover(t, p)
			if len(r.Blockers) != 0 {
				t.Errorf("blockers = %+v; want none", r.Blockers)
			}
			want := p.Slots()
			if got := slotSpecs(r.CandidateSlots); !reflect.DeepEqual(got, want) {
				t.Errorf("candidate slots:\ngot  %+v\nwant %+v", got, want)
			}
			for i, s := range r.CandidateSlots {
				if s.Index != i {
					t.Errorf("slot %d has index %d", i, s.Index)
				}
			}
			if r.Kernel != p.Kernel || r.MemoryMiB != p.MemoryMiB() || r.Shape != p.Shape || r.HostName != p.Name {
				t.Errorf("kernel, memory, shape, host = %s, %d, %s, %s; want %s, %d, %s, %s",
					r.Kernel, r.MemoryMiB, r.Shape, r.HostName, p.Kernel, p.MemoryMiB(), p.Shape, p.Name)
			}
			var wantNUMA []api.NUMANode
			for _, n := range p.NUMANodes {
				wantNUMA = append(wantNUMA, api.NUMANode{ID: n.ID, CPUs: n.CPUs, MemoryMiB: n.MemoryMiB})
			}
			if !reflect.DeepEqual(r.NUMANodes, wantNUMA) {
				t.Errorf("NUMA nodes = %+v; want %+v", r.NUMANodes, wantNUMA)
			}
			if len(r.GPUs) != len(p.GPUs) {
				t.Fatalf("got %d GPUs; want %d (NVSwitches must not count)", len(r.GPUs), len(p.GPUs))
			}
			for i, g := range r.GPUs {
				pg := p.GPUs[i]
				if g.PCI != pg.PCI || g.Model != p.GPUModel || g.NUMANode != pg.NUMANode || g.IOMMUGroup != pg.IOMMUGroup || g.Driver != pg.Driver {
					t.Errorf("GPU %d = %+v; want %s %s numa %d group %d %s", i, g, pg.PCI, p.GPUModel, pg.NUMANode, pg.IOMMUGroup, pg.Driver)
				}
			}
			if len(r.NVMe) != len(p.NVMe) || len(r.FabricVFs) != len(p.VFs) {
				t.Errorf("got %d NVMe, %d VFs; want %d, %d", len(r.NVMe), len(r.FabricVFs), len(p.NVMe), len(p.VFs))
			}
			for _, n := range r.NVMe {
				if mounted := n.Name == "nvme0n1"; n.InUse != mounted {
					t.Errorf("%s in use = %v; want %v", n.Name, n.InUse, mounted)
				}
			}
		})
	}
}

// blocker is a Blocker without its message, for comparing.
type blocker struct {
	Code   api.BlockerCode
	Device string
}

func TestBlockers(t *testing.T) {
	t.Parallel()
	slice, bm := sim.H200Slice8(), sim.H100Baremetal8()
	g := func(i int) string { return slice.GPUs[i].PCI }
	tests := []struct {
		name string
		p    sim.Profile
		want []blocker
		// wantSlots are the GPUs (by index) that stay slots; their pairing
		// must be the healthy profile's.
		wantSlots []int
	}{
		{"IOMMU off", with(slice, func(p *sim.Profile) { p.IOMMUOff = true }),
			[]blocker{{api.BlockerIOMMUDisabled, ""}}, nil},
		{"IOMMU off, bare metal", with(bm, func(p *sim.Profile) { p.IOMMUOff = true }),
			nil, all},
		{"no KVM", with(slice, func(p *sim.Profile) { p.NoKVM = true }),
			[]blocker{{api.BlockerKVMMissing, "/dev/kvm"}}, all},
		{"no KVM, bare metal", with(bm, func(p *sim.Profile) { p.NoKVM = true }),
			nil, all},
		{"no VFIO modules", with(slice, func(p *sim.Profile) { p.NoVFIOModules = true }),
			[]blocker{{api.BlockerVFIOModulesMissing, "vfio"}, {api.BlockerVFIOModulesMissing, "vfio_pci"},
				{api.BlockerVFIOModulesMissing, "vfio_iommu_type1"}}, all},
		{"GPU without NVMe on its NUMA node", slice.DropLastNVMe(1),
			[]blocker{{api.BlockerNoNVMeOnNUMA, g(7)}}, []int{0, 1, 2, 3, 4, 5, 6}},
		{"GPU without VF on its NUMA node", slice.DropLastVF(0),
			[]blocker{{api.BlockerNoVFOnNUMA, g(3)}}, []int{0, 1, 2, 4, 5, 6, 7}},
		{"slice GPU bound to nvidia", slice.BindGPU(g(2), "nvidia"),
			[]blocker{{api.BlockerGPUNotVFIOBound, g(2)}}, []int{0, 1, 3, 4, 5, 6, 7}},
		{"slice GPU unbound", slice.BindGPU(g(5), ""),
			[]blocker{{api.BlockerGPUNotVFIOBound, g(5)}}, []int{0, 1, 2, 3, 4, 6, 7}},
		{"bare-metal GPU bound to vfio-pci", bm.BindGPU(g(0), "vfio-pci"),
			[]blocker{{api.BlockerGPUNotNvidiaBound, g(0)}}, []int{1, 2, 3, 4, 5, 6, 7}},
		{"IOMMU group shared with an NVSwitch", slice.ShareIOMMUGroup(g(1), slice.Other[0].PCI),
			[]blocker{{api.BlockerGPUIOMMUGroupShared, g(1)}}, []int{0, 2, 3, 4, 5, 6, 7}},
		{"IOMMU group shared with the GPU's own NVMe", slice.ShareIOMMUGroup(g(6), slice.NVMe[7].PCI),
			[]blocker{{api.BlockerGPUIOMMUGroupShared, g(6)}}, []int{0, 1, 2, 3, 4, 5, 7}},
		{"IOMMU group with the GPU's own audio function", withDevice(slice, sim.Device{
			Func:   sim.Func{PCI: "0000:18:00.1", IOMMUGroup: slice.GPUs[0].IOMMUGroup, Driver: "vfio-pci"},
			Vendor: sim.VendorNVIDIA, DeviceID: 0x22ba, Class: 0x040300}),
			nil, all},
		{"IOMMU group with a PCI bridge", withDevice(slice, sim.Device{
			Func:   sim.Func{PCI: "0000:17:00.0", IOMMUGroup: slice.GPUs[0].IOMMUGroup, Driver: "pcieport"},
			Vendor: sim.VendorIntel, DeviceID: 0x1234, Class: sim.ClassPCIPort}),
			nil, all},
		{"virsh missing", slice.WithoutCommand("virsh"),
			[]blocker{{api.BlockerCommandMissing, "virsh"}}, all},
		{"qemu missing", slice.WithoutCommand("qemu-system-x86_64").WithoutCommand("qemu-img"),
			[]blocker{{api.BlockerCommandMissing, "qemu-system-x86_64"}, {api.BlockerCommandMissing, "qemu-img"}}, all},
		{"no seed tool", slice.WithoutCommand("cloud-localds"),
			[]blocker{{api.BlockerCommandMissing, "cloud-localds"}}, all},
		{"genisoimage instead of cloud-localds", with(slice.WithoutCommand("cloud-localds"), func(p *sim.Profile) {
			p.Commands = append(p.Commands, "genisoimage")
		}), nil, all},
		{"commands do not matter on bare metal", bm.WithoutCommand("nvidia-smi"), nil, all},
		{"no GPUs", with(slice, func(p *sim.Profile) { p.GPUs = nil }),
			[]blocker{{api.BlockerNoGPUs, ""}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := discover(t, tt.p)
			var got []blocker
			for _, b := range r.Blockers {
				got = append(got, blocker{b.Code, b.Device})
				if b.Message == "" {
					t.Errorf("blocker %s has no message", b.Code)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("blockers = %v; want %v", got, tt.want)
			}
			healthy := sim.H200Slice8().Slots()
			if tt.p.Shape == api.ShapeBaremetal {
				healthy = sim.H100Baremetal8().Slots()
			}
			if slices.Equal(tt.wantSlots, all) {
				tt.wantSlots = []int{0, 1, 2, 3, 4, 5, 6, 7}
			}
			var want []api.SlotSpec
			for _, i := range tt.wantSlots {
				want = append(want, healthy[i])
			}
			if got := slotSpecs(r.CandidateSlots); !reflect.DeepEqual(got, want) {
				t.Errorf("candidate slots:\ngot  %+v\nwant %+v", got, want)
			}
		})
	}
}

// all stands for every GPU of the profile in wantSlots.
var all = []int{-1}

func with(p sim.Profile, change func(*sim.Profile)) sim.Profile {
	c := p.Clone()
	change(&c)
	return c
}

func withDevice(p sim.Profile, d sim.Device) sim.Profile {
	return with(p, func(p *sim.Profile) { p.Other = append(p.Other, d) })
}

// A bare-metal GPU takes what its NUMA node has left and is still a slot.
func TestBaremetalOptionalPairs(t *testing.T) {
	t.Parallel()
	p := sim.H100Baremetal8().DropLastNVMe(1).DropLastVF(0)
	r := discover(t, p)
	if len(r.Blockers) != 0 {
		t.Errorf("blockers = %+v; want none", r.Blockers)
	}
	if len(r.CandidateSlots) != 8 {
		t.Fatalf("got %d slots; want 8", len(r.CandidateSlots))
	}
	want := p.Slots()
	if got := slotSpecs(r.CandidateSlots); !reflect.DeepEqual(got, want) {
		t.Errorf("candidate slots:\ngot  %+v\nwant %+v", got, want)
	}
	if r.CandidateSlots[7].NVMe != "" || r.CandidateSlots[3].FabricVF != "" {
		t.Errorf("slots 3 and 7 = %+v, %+v; want no VF on 3, no NVMe on 7", r.CandidateSlots[3], r.CandidateSlots[7])
	}
}

// A mounted data namespace is the host's, not a slot's: the NUMA node is
// one short and its last GPU has none.
func TestMountedNamespaceSkipped(t *testing.T) {
	t.Parallel()
	p := with(sim.H200Slice8(), func(p *sim.Profile) { p.NVMe[2].Mounts = map[int]string{1: "/scratch"} })
	r := discover(t, p)
	for _, s := range r.CandidateSlots {
		if s.NVMe == p.NVMe[2].ByID() {
			t.Errorf("slot %d got the mounted namespace %s", s.Index, s.NVMe)
		}
	}
	want := []blocker{{api.BlockerNoNVMeOnNUMA, p.GPUs[3].PCI}}
	var got []blocker
	for _, b := range r.Blockers {
		got = append(got, blocker{b.Code, b.Device})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("blockers = %v; want %v", got, want)
	}
}

func TestDeterministic(t *testing.T) {
	t.Parallel()
	for _, p := range []sim.Profile{sim.H200Slice8(), sim.H100Baremetal8().BindGPU("0000:18:00.0", "")} {
		a, b := discover(t, p), discover(t, p)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two discoveries differ:\n%+v\n%+v", p.Name, a, b)
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			t.Errorf("%s: JSON differs", p.Name)
		}
	}
}

func TestSlotAddresses(t *testing.T) {
	t.Parallel()
	subnet := netip.MustParsePrefix("10.77.0.0/16")
	slice, bm := sim.H200Slice8(), sim.H100Baremetal8()
	macs := map[string]string{}
	for _, p := range []sim.Profile{slice, bm} {
		r := discover(t, p)
		ips := map[string]bool{}
		for _, s := range r.CandidateSlots {
			hw, err := net.ParseMAC(s.MAC)
			if err != nil || len(hw) != 6 || hw[0] != 0x02 {
				t.Errorf("%s slot %d MAC %q: want 02:xx:xx:xx:xx:xx (%v)", p.Name, s.Index, s.MAC, err)
			}
			if other, dup := macs[s.MAC]; dup {
				t.Errorf("MAC %s of %s/%s repeats %s", s.MAC, p.Name, s.GPUPCI, other)
			}
			macs[s.MAC] = p.Name + "/" + s.GPUPCI
			ip, err := netip.ParseAddr(s.IP)
			if err != nil || !subnet.Contains(ip) || ips[s.IP] {
				t.Errorf("%s slot %d IP %q: want a unique address in %s (%v)", p.Name, s.Index, s.IP, subnet, err)
			}
			ips[s.IP] = true
			if want := fmt.Sprintf("10.77.1.%d", 10+s.Index); s.IP != want {
				t.Errorf("%s slot %d IP = %s; want %s", p.Name, s.Index, s.IP, want)
			}
		}
	}

	// A blocked GPU keeps its neighbours' addresses where they were.
	healthy := discover(t, slice)
	broken := discover(t, slice.BindGPU(slice.GPUs[2].PCI, "nvidia"))
	byGPU := map[string]api.CandidateSlot{}
	for _, s := range healthy.CandidateSlots {
		byGPU[s.GPUPCI] = s
	}
	for _, s := range broken.CandidateSlots {
		if h := byGPU[s.GPUPCI]; h.MAC != s.MAC || h.IP != s.IP {
			t.Errorf("GPU %s moved from %s %s to %s %s", s.GPUPCI, h.MAC, h.IP, s.MAC, s.IP)
		}
	}

	// Another subnet, another name: other addresses.
	r := discoverWith(t, slice, topology.Options{Shape: slice.Shape, HostName: "other", Subnet: netip.MustParsePrefix("172.20.0.0/20")})
	if got := r.CandidateSlots[0]; got.IP != "172.20.1.10" || got.MAC == healthy.CandidateSlots[0].MAC {
		t.Errorf("slot 0 = %s %s; want 172.20.1.10 and a MAC other than %s", got.IP, got.MAC, healthy.CandidateSlots[0].MAC)
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	p := sim.H200Slice8()
	root := t.TempDir()
	if err := sim.WriteTree(root, p); err != nil {
		t.Fatal(err)
	}
	h := topology.At(root, p.LookPath)
	tests := []struct {
		name string
		opts topology.Options
	}{
		{"no shape", topology.Options{HostName: "h"}},
		{"unknown shape", topology.Options{Shape: "vm", HostName: "h"}},
		{"no host name", topology.Options{Shape: api.ShapeGPUSlice}},
		{"IPv6 subnet", topology.Options{Shape: api.ShapeGPUSlice, HostName: "h", Subnet: netip.MustParsePrefix("fd00::/64")}},
		{"subnet too small", topology.Options{Shape: api.ShapeGPUSlice, HostName: "h", Subnet: netip.MustParsePrefix("10.0.0.0/24")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := topology.Discover(h, tt.opts); !errors.Is(err, topology.ErrInvalidOptions) {
				t.Errorf("got %v; want ErrInvalidOptions", err)
			}
		})
	}
	if _, err := topology.Discover(topology.Host{}, topology.Options{Shape: api.ShapeGPUSlice, HostName: "h"}); !errors.Is(err, topology.ErrInvalidHost) {
		t.Errorf("empty host: got %v; want ErrInvalidHost", err)
	}
}

// Discovery on the machine running the tests must not fail, whatever it has.
func TestReal(t *testing.T) {
	r, err := topology.Discover(topology.Real(), topology.Options{Shape: api.ShapeGPUSlice, HostName: "test"})
	if errors.Is(err, topology.ErrNoPCI) {
		t.Skipf("no PCI bus here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel %s, %d MiB, %d NUMA nodes, %d GPUs, %d NVMe, %d VFs, %d blockers",
		r.Kernel, r.MemoryMiB, len(r.NUMANodes), len(r.GPUs), len(r.NVMe), len(r.FabricVFs), len(r.Blockers))
	if r.Kernel == "" || !strings.Contains(r.Kernel, ".") {
		t.Errorf("kernel = %q", r.Kernel)
	}
}
