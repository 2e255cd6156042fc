package libvirt

import (
	"slices"
	"testing"
)

func TestCPUQuirks(t *testing.T) {
	tests := []struct {
		name, cpuinfo string
		want          []string
	}{
		{"bare metal", "processor\t: 0\nflags\t\t: fpu vmx arch_capabilities\n", nil},
		{"guest with the MSR", "flags\t\t: fpu hypervisor arch_capabilities\n", nil},
		{"nested without the MSR", "processor\t: 0\nflags\t\t: fpu sse2 hypervisor\n", []string{"arch-capabilities"}},
		{"no flags line", "processor\t: 0\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := CPUQuirks([]byte(tc.cpuinfo)); !slices.Equal(got, tc.want) {
				t.Errorf("got %q; want %q", got, tc.want)
			}
		})
	}
}
