package libvirt

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// TestNetworkXML: the slice network is isolated, open (no libvirt
// firewall), without DHCP or DNS; bad specs, libvirt's shared default
// network among them, are refused.
func TestNetworkXML(t *testing.T) {
	good := NetworkSpec{Name: "gpuaas-slices", Bridge: "gpuaas-br0", Gateway: netip.MustParsePrefix("10.77.0.1/16")}
	out, err := NetworkXML(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<forward mode="open">`, `<bridge name="gpuaas-br0" stp="off">`, `<port isolated="yes">`,
		`<dns enable="no">`, `<ip address="10.77.0.1" prefix="16">`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("network XML has no %s:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "dhcp") {
		t.Errorf("network XML has DHCP:\n%s", out)
	}
	if err := checkNetworkXML(good.Name, string(out)); err != nil {
		t.Errorf("checkNetworkXML(our own XML) = %v", err)
	}
	for _, bad := range []NetworkSpec{
		{Name: "default", Bridge: "virbr0", Gateway: good.Gateway},
		{Name: "a b", Bridge: "br0", Gateway: good.Gateway},
		{Name: "n", Bridge: "a-bridge-name-too-long", Gateway: good.Gateway},
		{Name: "n", Bridge: "br0", Gateway: netip.MustParsePrefix("fd00::1/64")},
		{Name: "n", Bridge: "br0"},
	} {
		if _, err := NetworkXML(bad); !errors.Is(err, host.ErrInvalidSpec) {
			t.Errorf("NetworkXML(%+v) = %v; want ErrInvalidSpec", bad, err)
		}
	}
	// An existing network of the name that shares its bridge is refused.
	for _, live := range []string{
		`<network><name>n</name><forward mode="nat"/><bridge name="virbr0"/><ip address="192.168.122.1" netmask="255.255.255.0"><dhcp><range start="192.168.122.2" end="192.168.122.254"/></dhcp></ip></network>`,
		`<network><name>n</name><forward mode="open"/><bridge name="br0"/><ip address="10.0.0.1" prefix="24"/></network>`,
	} {
		if err := checkNetworkXML("n", live); !errors.Is(err, ErrNetworkNotIsolated) {
			t.Errorf("checkNetworkXML(%s) = %v; want ErrNetworkNotIsolated", live, err)
		}
	}
}
