package libvirt

import (
	"encoding/xml"
	"fmt"
	"strconv"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// The structs below are the subset of libvirt's domain schema a slice VM
// uses (https://libvirt.org/formatdomain.html). They are built as data and
// marshalled, never assembled from text, so names and paths are escaped
// by encoding/xml.

type domainXML struct {
	XMLName    xml.Name     `xml:"domain"`
	Type       string       `xml:"type,attr"`
	Name       string       `xml:"name"`
	UUID       string       `xml:"uuid,omitempty"`
	Memory     sizeXML      `xml:"memory"`
	VCPU       vcpuXML      `xml:"vcpu"`
	CPUTune    *cputuneXML  `xml:"cputune"`
	NUMATune   *numatuneXML `xml:"numatune"`
	OS         osXML        `xml:"os"`
	Features   featuresXML  `xml:"features"`
	CPU        cpuXML       `xml:"cpu"`
	Clock      clockXML     `xml:"clock"`
	OnPoweroff string       `xml:"on_poweroff"`
	OnReboot   string       `xml:"on_reboot"`
	OnCrash    string       `xml:"on_crash"`
	Devices    devicesXML   `xml:"devices"`
}

type sizeXML struct {
	Unit  string `xml:"unit,attr"`
	Value int    `xml:",chardata"`
}

type vcpuXML struct {
	Placement string `xml:"placement,attr"`
	CPUSet    string `xml:"cpuset,attr,omitempty"`
	Count     int    `xml:",chardata"`
}

type cputuneXML struct {
	VCPUPins    []vcpupinXML `xml:"vcpupin"`
	EmulatorPin *cpusetXML   `xml:"emulatorpin"`
}

type vcpupinXML struct {
	VCPU   int    `xml:"vcpu,attr"`
	CPUSet string `xml:"cpuset,attr"`
}

type cpusetXML struct {
	CPUSet string `xml:"cpuset,attr"`
}

type numatuneXML struct {
	Memory numaMemoryXML `xml:"memory"`
}

type numaMemoryXML struct {
	Mode    string `xml:"mode,attr"`
	Nodeset string `xml:"nodeset,attr"`
}

type osXML struct {
	Type    osTypeXML `xml:"type"`
	Kernel  string    `xml:"kernel,omitempty"`
	Initrd  string    `xml:"initrd,omitempty"`
	Cmdline string    `xml:"cmdline,omitempty"`
	Boot    *bootXML  `xml:"boot"`
}

type osTypeXML struct {
	Arch    string `xml:"arch,attr"`
	Machine string `xml:"machine,attr"`
	Value   string `xml:",chardata"`
}

type bootXML struct {
	Dev string `xml:"dev,attr"`
}

// empty marshals as an element with no content, e.g. <acpi></acpi>.
type empty struct{}

type featuresXML struct {
	ACPI *empty `xml:"acpi"`
	APIC *empty `xml:"apic"`
}

type cpuXML struct {
	Mode     string       `xml:"mode,attr"`
	Features []featureXML `xml:"feature"`
}

type featureXML struct {
	Policy string `xml:"policy,attr"`
	Name   string `xml:"name,attr"`
}

type clockXML struct {
	Offset string `xml:"offset,attr"`
}

type devicesXML struct {
	Disks      []diskXML      `xml:"disk"`
	Interfaces []interfaceXML `xml:"interface"`
	HostDevs   []hostdevXML   `xml:"hostdev"`
	Serial     consoleXML     `xml:"serial"`
	Console    consoleXML     `xml:"console"`
	Video      videoXML       `xml:"video"`
	MemBalloon modelXML       `xml:"memballoon"`
}

type diskXML struct {
	Type     string        `xml:"type,attr"`
	Device   string        `xml:"device,attr"`
	Driver   diskDriverXML `xml:"driver"`
	Source   diskSourceXML `xml:"source"`
	Target   diskTargetXML `xml:"target"`
	ReadOnly *empty        `xml:"readonly"`
	Serial   string        `xml:"serial,omitempty"`
}

type diskDriverXML struct {
	Name  string `xml:"name,attr"`
	Type  string `xml:"type,attr"`
	Cache string `xml:"cache,attr,omitempty"`
	IO    string `xml:"io,attr,omitempty"`
}

type diskSourceXML struct {
	File string `xml:"file,attr,omitempty"`
	Dev  string `xml:"dev,attr,omitempty"`
}

type diskTargetXML struct {
	Dev string `xml:"dev,attr"`
	Bus string `xml:"bus,attr"`
}

type interfaceXML struct {
	Type   string             `xml:"type,attr"`
	MAC    *macXML            `xml:"mac"`
	Source interfaceSourceXML `xml:"source"`
	Model  modelXML           `xml:"model"`
}

type macXML struct {
	Address string `xml:"address,attr"`
}

type interfaceSourceXML struct {
	Network string `xml:"network,attr"`
}

type modelXML struct {
	Model string `xml:"model,attr,omitempty"`
	Type  string `xml:"type,attr,omitempty"`
}

type hostdevXML struct {
	Mode    string           `xml:"mode,attr"`
	Type    string           `xml:"type,attr"`
	Managed string           `xml:"managed,attr"`
	Source  hostdevSourceXML `xml:"source"`
}

type hostdevSourceXML struct {
	Address pciAddressXML `xml:"address"`
}

type pciAddressXML struct {
	Domain   string `xml:"domain,attr"`
	Bus      string `xml:"bus,attr"`
	Slot     string `xml:"slot,attr"`
	Function string `xml:"function,attr"`
}

type consoleXML struct {
	Type   string           `xml:"type,attr"`
	Log    *chardevLogXML   `xml:"log"`
	Target consoleTargetXML `xml:"target"`
}

// chardevLogXML copies a character device's output to a file
// (https://libvirt.org/formatdomain.html#consoles-serial-parallel-channel-devices).
type chardevLogXML struct {
	File   string `xml:"file,attr"`
	Append string `xml:"append,attr"`
}

type consoleTargetXML struct {
	Type string `xml:"type,attr,omitempty"`
	Port int    `xml:"port,attr"`
}

type videoXML struct {
	Model modelXML `xml:"model"`
}

// DomainXML renders spec as a libvirt KVM domain definition. It fails,
// wrapping host.ErrInvalidSpec, on a spec libvirt would reject or misread.
func DomainXML(spec host.DomainSpec) ([]byte, error) {
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	d := domainXML{
		Type:   "kvm",
		Name:   spec.Name,
		UUID:   spec.UUID,
		Memory: sizeXML{Unit: "MiB", Value: spec.MemoryMiB},
		VCPU:   vcpuXML{Placement: "static", CPUSet: spec.CPUSet, Count: spec.VCPUs},
		// q35 gives the guest PCIe root ports, which GPUs with large BARs
		// need.
		OS: osXML{
			Type: osTypeXML{Arch: "x86_64", Machine: "q35", Value: "hvm"},
		},
		// Without ACPI the guest never sees Shutdown's power-button press.
		Features:   featuresXML{ACPI: &empty{}, APIC: &empty{}},
		CPU:        cpuXML{Mode: "host-passthrough"},
		Clock:      clockXML{Offset: "utc"},
		OnPoweroff: "destroy",
		OnReboot:   "restart",
		OnCrash:    "destroy",
	}
	if spec.Emulate {
		// TCG has no host CPU to pass through: the most it can emulate.
		d.Type, d.CPU = "qemu", cpuXML{Mode: "maximum"}
	}
	for _, f := range spec.DisableCPUFeatures {
		d.CPU.Features = append(d.CPU.Features, featureXML{Policy: "disable", Name: f})
	}
	if spec.Kernel != "" {
		d.OS.Kernel, d.OS.Initrd, d.OS.Cmdline = spec.Kernel, spec.Initrd, spec.Cmdline
	} else {
		d.OS.Boot = &bootXML{Dev: "hd"}
	}
	if spec.CPUSet != "" {
		tune, err := cpuTune(spec.CPUSet, spec.VCPUs)
		if err != nil {
			return nil, err
		}
		d.CPUTune = tune
	}
	if spec.NUMANode >= 0 {
		d.NUMATune = &numatuneXML{Memory: numaMemoryXML{Mode: "strict", Nodeset: strconv.Itoa(spec.NUMANode)}}
	}

	dev := &d.Devices
	for _, disk := range spec.Disks {
		dev.Disks = append(dev.Disks, diskElement(disk))
	}
	if spec.SeedISO != "" {
		// The seed is a read-only virtio disk, not a SATA CD-ROM: cloud
		// kernels (Debian's linux-image-cloud-amd64, the guest image's) have
		// no AHCI driver, and NoCloud finds its seed by the filesystem label
		// on any block device.
		dev.Disks = append(dev.Disks, diskXML{
			Type:     "file",
			Device:   "disk",
			Driver:   diskDriverXML{Name: "qemu", Type: "raw"},
			Source:   diskSourceXML{File: spec.SeedISO},
			Target:   diskTargetXML{Dev: seedTarget(spec.Disks), Bus: "virtio"},
			ReadOnly: &empty{},
		})
	}
	if spec.Network != "" {
		nic := interfaceXML{
			Type:   "network",
			Source: interfaceSourceXML{Network: spec.Network},
			Model:  modelXML{Type: "virtio"},
		}
		if spec.MAC != "" {
			nic.MAC = &macXML{Address: spec.MAC}
		}
		dev.Interfaces = append(dev.Interfaces, nic)
	}
	seen := map[pciAddress]bool{}
	for _, a := range spec.HostDevs {
		p, err := parsePCIAddress(a)
		if err != nil {
			return nil, err
		}
		if seen[p] {
			return nil, fmt.Errorf("%w: pci address %q listed twice", host.ErrInvalidSpec, a)
		}
		seen[p] = true
		dev.HostDevs = append(dev.HostDevs, hostdevXML{
			Mode: "subsystem",
			Type: "pci",
			// hostd binds the devices to vfio-pci itself before define and
			// rebinds them after release; libvirt must not touch drivers.
			Managed: "no",
			Source: hostdevSourceXML{Address: pciAddressXML{
				Domain:   fmt.Sprintf("0x%04x", p.Domain),
				Bus:      fmt.Sprintf("0x%02x", p.Bus),
				Slot:     fmt.Sprintf("0x%02x", p.Slot),
				Function: fmt.Sprintf("0x%x", p.Function),
			}},
		})
	}
	// The console is reached through the gateway, so: a serial PTY and no
	// graphics at all.
	dev.Serial = consoleXML{Type: "pty", Target: consoleTargetXML{Port: 0}}
	if spec.SerialLog != "" {
		dev.Serial.Log = &chardevLogXML{File: spec.SerialLog, Append: "off"}
	}
	dev.Console = consoleXML{Type: "pty", Target: consoleTargetXML{Type: "serial", Port: 0}}
	dev.Video = videoXML{Model: modelXML{Type: "none"}}
	// VFIO pins all guest memory, so a balloon could never give any back.
	dev.MemBalloon = modelXML{Model: "none"}

	out, err := xml.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal domain %s: %w", spec.Name, err)
	}
	return append(out, '\n'), nil
}

// seedTarget is the first virtio disk name the VM's disks leave free.
func seedTarget(disks []host.Disk) string {
	used := map[string]bool{}
	for _, d := range disks {
		used[d.Target] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		if t := "vd" + string(c); !used[t] {
			return t
		}
	}
	return "vdzz"
}

// cpuTune pins vCPU i to the i-th CPU of cpuset when there are enough
// CPUs for one each, and every vCPU to the whole set otherwise; the
// emulator threads share the set.
func cpuTune(cpuset string, vcpus int) (*cputuneXML, error) {
	cpus, err := parseCPUSet(cpuset)
	if err != nil {
		return nil, err
	}
	tune := &cputuneXML{EmulatorPin: &cpusetXML{CPUSet: cpuset}}
	for i := 0; i < vcpus; i++ {
		pin := cpuset
		if len(cpus) >= vcpus {
			pin = strconv.Itoa(cpus[i])
		}
		tune.VCPUPins = append(tune.VCPUPins, vcpupinXML{VCPU: i, CPUSet: pin})
	}
	return tune, nil
}

// diskElement maps a Disk: device nodes as block sources, anything else as
// an image file; raw disks bypass the host page cache.
func diskElement(disk host.Disk) diskXML {
	x := diskXML{
		Type:   "file",
		Device: "disk",
		Driver: diskDriverXML{Name: "qemu", Type: "qcow2"},
		Target: diskTargetXML{Dev: disk.Target, Bus: "virtio"},
	}
	if disk.Raw {
		x.Driver = diskDriverXML{Name: "qemu", Type: "raw", Cache: "none", IO: "native"}
	}
	if isBlockDevice(disk.Source) {
		x.Type = "block"
		x.Source.Dev = disk.Source
	} else {
		x.Source.File = disk.Source
	}
	if disk.ReadOnly {
		x.ReadOnly = &empty{}
	}
	x.Serial = disk.Serial
	return x
}
