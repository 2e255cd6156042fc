package libvirt

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/host"
)

var update = flag.Bool("update", false, "rewrite testdata/*.xml from the current DomainXML")

// goldenSpecs are rendered to testdata/<name>.xml, and defined and booted
// on libvirt's test driver by the lifecycle test.
var goldenSpecs = []struct {
	name string
	spec host.DomainSpec
}{
	{
		// Two GPUs and their fabric VFs on NUMA node 1, one vCPU per host
		// CPU, a raw NVMe boot disk and a raw NVMe scratch disk.
		name: "slice-2gpu-numa",
		spec: host.DomainSpec{
			Name:      "alloc-7f3a2c",
			UUID:      "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b",
			VCPUs:     24,
			MemoryMiB: 131072,
			NUMANode:  1,
			CPUSet:    "32-43,96-107",
			HostDevs: []host.PCIAddress{
				"0000:3b:00.0", "0000:5e:00.0", // GPUs
				"0000:3c:00.2", "0000:5f:00.3", // ConnectX VFs
			},
			Disks: []host.Disk{
				{Source: "/dev/disk/by-id/nvme-SAMSUNG_MZQL27T6HBLA-00A07_S6CKNE0T100001", Target: "vda", Raw: true},
				{Source: "/dev/disk/by-id/nvme-SAMSUNG_MZQL27T6HBLA-00A07_S6CKNE0T100002", Target: "vdb", Raw: true},
			},
			SeedISO: "/var/lib/gpuaas/slices/alloc-7f3a2c/seed.iso",
			MAC:     "52:54:00:7f:3a:2c",
			Network: "default",
		},
	},
	{
		// The least a VM can be: one vCPU, no pinning, one qcow2 image.
		name: "minimal",
		spec: host.DomainSpec{
			Name:      "vm-minimal",
			VCPUs:     1,
			MemoryMiB: 512,
			NUMANode:  -1,
			Disks:     []host.Disk{{Source: "/var/lib/libvirt/images/minimal.qcow2", Target: "vda"}},
		},
	},
	{
		// Fewer host CPUs than vCPUs: every vCPU floats over the set. A
		// read-only raw image file, a NIC with a libvirt-chosen MAC.
		name: "shared-cpuset",
		spec: host.DomainSpec{
			Name:      "vm-shared",
			UUID:      "0d4f6a1b-2c3d-4e5f-9a8b-7c6d5e4f3a2b",
			VCPUs:     8,
			MemoryMiB: 16384,
			NUMANode:  0,
			CPUSet:    "0-3",
			HostDevs:  []host.PCIAddress{"0000:af:1f.7"},
			Disks: []host.Disk{
				{Source: "/var/lib/gpuaas/slice-images/ubuntu-24.04.raw", Target: "vda", Raw: true, ReadOnly: true},
			},
			Network: "default",
		},
	},
	{
		// The guest image of hostd/guestimage: direct kernel boot from a
		// qcow2 overlay, a NoCloud seed, one NIC.
		name: "direct-kernel",
		spec: host.DomainSpec{
			Name:      "alloc-kvm01",
			VCPUs:     1,
			MemoryMiB: 512,
			NUMANode:  -1,
			Disks:     []host.Disk{{Source: "/var/lib/gpuaas/slices/alloc-kvm01/overlay.qcow2", Target: "vda"}},
			SeedISO:   "/var/lib/gpuaas/slices/alloc-kvm01/seed.iso",
			Kernel:    "/var/cache/gpuaas/images/0123456789abcdef/vmlinuz",
			Initrd:    "/var/cache/gpuaas/images/0123456789abcdef/initrd.img",
			Cmdline:   "root=/dev/vda rw console=ttyS0",
			MAC:       "52:54:00:6b:76:01",
			// Nested KVM without IA32_ARCH_CAPABILITIES (CPUQuirks).
			DisableCPUFeatures: []string{"arch-capabilities"},
			Network:            "default",
		},
	},
	{
		// A slice with a volume: its image file raw, with the volume id as
		// serial so the guest finds it (docs/decisions/0030).
		name: "slice-volume",
		spec: host.DomainSpec{
			Name: "alloc-vol01", VCPUs: 1, MemoryMiB: 512, NUMANode: -1,
			Disks: []host.Disk{{Source: "/var/lib/gpuaas/slices/alloc-vol01/overlay.qcow2", Target: "vda"},
				{Source: "/var/lib/gpuaas/volumes/vol-7k2m9x4q1c.img", Target: "vdb", Raw: true, Serial: "vol-7k2m9x4q1c"}},
			SeedISO: "/var/lib/gpuaas/slices/alloc-vol01/seed.iso",
			MAC:     "52:54:00:6b:76:02",
			Network: "default",
		},
	},
}

func TestDomainXMLGolden(t *testing.T) {
	for _, tc := range goldenSpecs {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DomainXML(tc.spec)
			if err != nil {
				t.Fatalf("DomainXML: %v", err)
			}
			path := filepath.Join("testdata", tc.name+".xml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestDomainXMLGolden -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("DomainXML(%s) differs from %s (-update rewrites it)\ngot:\n%s\nwant:\n%s", tc.name, path, got, want)
			}
		})
	}
}

func TestDomainXMLInvalid(t *testing.T) {
	ok := host.DomainSpec{Name: "vm", VCPUs: 2, MemoryMiB: 1024, NUMANode: -1}
	tests := []struct {
		name   string
		mutate func(*host.DomainSpec)
	}{
		{"empty name", func(s *host.DomainSpec) { s.Name = "" }},
		{"name with slash", func(s *host.DomainSpec) { s.Name = "a/b" }},
		{"name with space", func(s *host.DomainSpec) { s.Name = "a b" }},
		{"bad uuid", func(s *host.DomainSpec) { s.UUID = "not-a-uuid" }},
		{"zero vcpus", func(s *host.DomainSpec) { s.VCPUs = 0 }},
		{"negative vcpus", func(s *host.DomainSpec) { s.VCPUs = -4 }},
		{"zero memory", func(s *host.DomainSpec) { s.MemoryMiB = 0 }},
		{"numa node below -1", func(s *host.DomainSpec) { s.NUMANode = -2 }},
		{"pci missing function", func(s *host.DomainSpec) { s.HostDevs = []host.PCIAddress{"0000:18:00"} }},
		{"pci missing domain", func(s *host.DomainSpec) { s.HostDevs = []host.PCIAddress{"18:00.0"} }},
		{"pci function 8", func(s *host.DomainSpec) { s.HostDevs = []host.PCIAddress{"0000:18:00.8"} }},
		{"pci slot over 1f", func(s *host.DomainSpec) { s.HostDevs = []host.PCIAddress{"0000:18:20.0"} }},
		{"pci non-hex", func(s *host.DomainSpec) { s.HostDevs = []host.PCIAddress{"0000:1g:00.0"} }},
		{"pci short bus", func(s *host.DomainSpec) { s.HostDevs = []host.PCIAddress{"0000:8:00.0"} }},
		{"pci surrounding space", func(s *host.DomainSpec) { s.HostDevs = []host.PCIAddress{" 0000:18:00.0"} }},
		{"pci trailing newline", func(s *host.DomainSpec) { s.HostDevs = []host.PCIAddress{"0000:18:00.0\n"} }},
		{"pci empty", func(s *host.DomainSpec) { s.HostDevs = []host.PCIAddress{""} }},
		{"pci twice", func(s *host.DomainSpec) { s.HostDevs = []host.PCIAddress{"0000:18:00.0", "0000:18:00.0"} }},
		{"cpuset letters", func(s *host.DomainSpec) { s.CPUSet = "a-b" }},
		{"cpuset descending", func(s *host.DomainSpec) { s.CPUSet = "7-3" }},
		{"cpuset overlap", func(s *host.DomainSpec) { s.CPUSet = "0-3,2" }},
		{"cpuset empty item", func(s *host.DomainSpec) { s.CPUSet = "0,,1" }},
		{"cpuset negative", func(s *host.DomainSpec) { s.CPUSet = "-1" }},
		{"cpuset huge", func(s *host.DomainSpec) { s.CPUSet = "0-99999999" }},
		{"disk relative source", func(s *host.DomainSpec) { s.Disks = []host.Disk{{Source: "img.qcow2", Target: "vda"}} }},
		{"disk unclean source", func(s *host.DomainSpec) { s.Disks = []host.Disk{{Source: "/dev/../etc/passwd", Target: "vda"}} }},
		{"disk sata target", func(s *host.DomainSpec) { s.Disks = []host.Disk{{Source: "/dev/nvme0n1", Target: "sda"}} }},
		{"disk no target", func(s *host.DomainSpec) { s.Disks = []host.Disk{{Source: "/dev/nvme0n1"}} }},
		{"disk target twice", func(s *host.DomainSpec) {
			s.Disks = []host.Disk{{Source: "/dev/nvme0n1", Target: "vda"}, {Source: "/dev/nvme1n1", Target: "vda"}}
		}},
		{"disk serial over 20 bytes", func(s *host.DomainSpec) {
			s.Disks = []host.Disk{{Source: "/v/vol-1.img", Target: "vdb", Raw: true, Serial: "vol-0123456789abcdefg"}}
		}},
		{"disk serial with slash", func(s *host.DomainSpec) {
			s.Disks = []host.Disk{{Source: "/v/vol-1.img", Target: "vdb", Raw: true, Serial: "vol/1"}}
		}},
		{"seed iso relative", func(s *host.DomainSpec) { s.SeedISO = "seed.iso" }},
		{"kernel relative", func(s *host.DomainSpec) { s.Kernel = "vmlinuz" }},
		{"initrd relative", func(s *host.DomainSpec) { s.Kernel, s.Initrd = "/boot/vmlinuz", "initrd.img" }},
		{"initrd without kernel", func(s *host.DomainSpec) { s.Initrd = "/boot/initrd.img" }},
		{"cmdline without kernel", func(s *host.DomainSpec) { s.Cmdline = "root=/dev/vda" }},
		{"cpu feature with space", func(s *host.DomainSpec) { s.DisableCPUFeatures = []string{"arch capabilities"} }},
		{"cpu feature empty", func(s *host.DomainSpec) { s.DisableCPUFeatures = []string{""} }},
		{"mac without network", func(s *host.DomainSpec) { s.MAC = "52:54:00:00:00:01" }},
		{"mac malformed", func(s *host.DomainSpec) { s.MAC, s.Network = "52:54:00:00:01", "default" }},
		{"mac dashes", func(s *host.DomainSpec) { s.MAC, s.Network = "52-54-00-00-00-01", "default" }},
		{"mac multicast", func(s *host.DomainSpec) { s.MAC, s.Network = "01:00:5e:00:00:01", "default" }},
	}
	if _, err := DomainXML(ok); err != nil {
		t.Fatalf("DomainXML(base spec): %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := ok
			tc.mutate(&spec)
			got, err := DomainXML(spec)
			if !errors.Is(err, host.ErrInvalidSpec) {
				t.Fatalf("DomainXML error = %v; want host.ErrInvalidSpec (xml %q)", err, got)
			}
		})
	}
}

func TestParsePCIAddress(t *testing.T) {
	tests := []struct {
		in   host.PCIAddress
		want pciAddress
	}{
		{"0000:18:00.0", pciAddress{0, 0x18, 0, 0}},
		{"0000:af:1f.7", pciAddress{0, 0xaf, 0x1f, 7}},
		{"0001:AF:00.1", pciAddress{1, 0xaf, 0, 1}},
		{"ffff:ff:1f.7", pciAddress{0xffff, 0xff, 0x1f, 7}},
	}
	for _, tc := range tests {
		got, err := parsePCIAddress(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parsePCIAddress(%q) = %+v, %v; want %+v, nil", tc.in, got, err, tc.want)
		}
	}
}

func TestParseCPUSet(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"0", []int{0}},
		{"0-3", []int{0, 1, 2, 3}},
		{"4-5,0-1", []int{4, 5, 0, 1}},
		{"32-33,96-97", []int{32, 33, 96, 97}},
	}
	for _, tc := range tests {
		got, err := parseCPUSet(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseCPUSet(%q) = %v, %v; want %v, nil", tc.in, got, err, tc.want)
		}
	}
}

// TestDomainXMLEmulate: an emulated guest is a "qemu" (TCG) domain with
// QEMU's maximum CPU model; host-passthrough needs KVM.
func TestDomainXMLEmulate(t *testing.T) {
	spec := host.DomainSpec{Name: "vm", VCPUs: 1, MemoryMiB: 512, NUMANode: -1, Emulate: true}
	got, err := DomainXML(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<domain type="qemu">`, `<cpu mode="maximum">`} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("DomainXML(Emulate) lacks %s:\n%s", want, got)
		}
	}
	if bytes.Contains(got, []byte("host-passthrough")) {
		t.Errorf("DomainXML(Emulate) passes the host CPU through:\n%s", got)
	}
}
