package libvirt

import (
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// pciAddress is a parsed PCI function address.
type pciAddress struct {
	Domain, Bus, Slot, Function uint64
}

// pciAddressRE is the sysfs spelling, "0000:18:00.0": 4, 2 and 2 hex
// digits and a function digit. Anything looser is refused so a typo in a
// slot record never reaches libvirt as some other device.
var pciAddressRE = regexp.MustCompile(`^([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$`)

// parsePCIAddress parses and validates a domain:bus:slot.function address.
func parsePCIAddress(a host.PCIAddress) (pciAddress, error) {
	m := pciAddressRE.FindStringSubmatch(string(a))
	if m == nil {
		return pciAddress{}, fmt.Errorf("%w: pci address %q: want domain:bus:slot.function like 0000:18:00.0", host.ErrInvalidSpec, a)
	}
	var p pciAddress
	p.Domain, _ = strconv.ParseUint(m[1], 16, 16)
	p.Bus, _ = strconv.ParseUint(m[2], 16, 8)
	p.Slot, _ = strconv.ParseUint(m[3], 16, 8)
	p.Function, _ = strconv.ParseUint(m[4], 16, 8)
	if p.Slot > 0x1f {
		return pciAddress{}, fmt.Errorf("%w: pci address %q: slot 0x%02x is over 0x1f", host.ErrInvalidSpec, a, p.Slot)
	}
	return p, nil
}

// parseCPUSet expands a cpuset list ("0-15,32-47") into CPU numbers in
// the order written. Ranges must ascend and no CPU may repeat.
func parseCPUSet(s string) ([]int, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: cpuset %q: %s", host.ErrInvalidSpec, s, why)
	}
	var cpus []int
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := parseCPU(lo)
		if err != nil {
			return nil, bad(err.Error())
		}
		last := first
		if isRange {
			if last, err = parseCPU(hi); err != nil {
				return nil, bad(err.Error())
			}
			if last < first {
				return nil, bad("descending range " + part)
			}
		}
		for c := first; c <= last; c++ {
			if seen[c] {
				return nil, bad("cpu " + strconv.Itoa(c) + " listed twice")
			}
			seen[c] = true
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// maxCPU bounds cpuset numbers so a typo cannot expand to millions of pins.
const maxCPU = 4095

func parseCPU(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a cpu number", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > maxCPU {
		return 0, fmt.Errorf("cpu %q is out of range 0-%d", s, maxCPU)
	}
	return n, nil
}

var (
	uuidRE       = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	diskTargetRE = regexp.MustCompile(`^vd[a-z]{1,2}$`)
	// diskSerialRE is a disk serial: virtio-blk keeps 20 bytes, and the
	// serial is a file name in the guest's /dev/disk/by-id.
	diskSerialRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,19}$`)
	cpuFeatureRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
)

// validateName accepts what libvirt accepts as a domain name and what is
// safe in file names and log lines: no '/', no spaces or control runes.
func validateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty domain name", host.ErrInvalidSpec)
	}
	if len(name) > 200 {
		return fmt.Errorf("%w: domain name %.20q... is %d bytes, over 200", host.ErrInvalidSpec, name, len(name))
	}
	for _, r := range name {
		if r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("%w: domain name %q contains %q", host.ErrInvalidSpec, name, r)
		}
	}
	return nil
}

func validatePath(what, p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return fmt.Errorf("%w: %s %q: want a clean absolute path", host.ErrInvalidSpec, what, p)
	}
	return nil
}

// isBlockDevice reports whether a disk source names a device node rather
// than an image file.
func isBlockDevice(p string) bool { return strings.HasPrefix(p, "/dev/") }

// validateMAC accepts a unicast MAC in the colon form libvirt stores.
func validateMAC(mac string) error {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 || !strings.Contains(mac, ":") {
		return fmt.Errorf("%w: mac %q: want six colon-separated octets", host.ErrInvalidSpec, mac)
	}
	if hw[0]&1 == 1 {
		return fmt.Errorf("%w: mac %q is a multicast address", host.ErrInvalidSpec, mac)
	}
	return nil
}

// validateSpec checks what domainXML does not check while building.
func validateSpec(spec host.DomainSpec) error {
	if err := validateName(spec.Name); err != nil {
		return err
	}
	if spec.UUID != "" && !uuidRE.MatchString(spec.UUID) {
		return fmt.Errorf("%w: uuid %q", host.ErrInvalidSpec, spec.UUID)
	}
	if spec.VCPUs <= 0 {
		return fmt.Errorf("%w: vcpus %d: want at least 1", host.ErrInvalidSpec, spec.VCPUs)
	}
	if spec.MemoryMiB <= 0 {
		return fmt.Errorf("%w: memory %d MiB: want at least 1", host.ErrInvalidSpec, spec.MemoryMiB)
	}
	if spec.NUMANode < -1 {
		return fmt.Errorf("%w: numa node %d: want -1 (none) or a node number", host.ErrInvalidSpec, spec.NUMANode)
	}
	targets := map[string]bool{}
	for _, d := range spec.Disks {
		if err := validatePath("disk source", d.Source); err != nil {
			return err
		}
		if !diskTargetRE.MatchString(d.Target) {
			return fmt.Errorf("%w: disk target %q: want a virtio name like vda", host.ErrInvalidSpec, d.Target)
		}
		if targets[d.Target] {
			return fmt.Errorf("%w: disk target %q used twice", host.ErrInvalidSpec, d.Target)
		}
		targets[d.Target] = true
		if d.Serial != "" && !diskSerialRE.MatchString(d.Serial) {
			return fmt.Errorf("%w: disk serial %q: want 1 to 20 letters, digits and '-'", host.ErrInvalidSpec, d.Serial)
		}
	}
	if spec.SeedISO != "" {
		if err := validatePath("seed iso", spec.SeedISO); err != nil {
			return err
		}
	}
	if spec.Kernel != "" {
		if err := validatePath("kernel", spec.Kernel); err != nil {
			return err
		}
		if spec.Initrd != "" {
			if err := validatePath("initrd", spec.Initrd); err != nil {
				return err
			}
		}
	} else if spec.Initrd != "" || spec.Cmdline != "" {
		return fmt.Errorf("%w: initrd or kernel command line given without a kernel", host.ErrInvalidSpec)
	}
	if spec.SerialLog != "" {
		if err := validatePath("serial log", spec.SerialLog); err != nil {
			return err
		}
	}
	for _, f := range spec.DisableCPUFeatures {
		if !cpuFeatureRE.MatchString(f) {
			return fmt.Errorf("%w: cpu feature %q", host.ErrInvalidSpec, f)
		}
	}
	if spec.MAC != "" {
		if spec.Network == "" {
			return fmt.Errorf("%w: mac %q given without a network", host.ErrInvalidSpec, spec.MAC)
		}
		if err := validateMAC(spec.MAC); err != nil {
			return err
		}
	}
	return nil
}
