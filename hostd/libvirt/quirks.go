package libvirt

import (
	"slices"
	"strings"
)

// CPUQuirks returns the CPU features a host-passthrough guest must not
// be given on the host whose /proc/cpuinfo is cpuinfo. Under nested KVM
// the host may lack IA32_ARCH_CAPABILITIES (no arch_capabilities flag)
// while QEMU's host model still sets it, and QEMU 7.2 aborts at start
// ("failed to set MSR 0x10a"); disabling the feature is what QEMU does
// itself on such hosts in later releases.
func CPUQuirks(cpuinfo []byte) []string {
	var quirks []string
	for _, line := range strings.Split(string(cpuinfo), "\n") {
		key, flags, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(key) != "flags" {
			continue
		}
		f := strings.Fields(flags)
		if slices.Contains(f, "hypervisor") && !slices.Contains(f, "arch_capabilities") {
			quirks = append(quirks, "arch-capabilities")
		}
		break
	}
	return quirks
}
