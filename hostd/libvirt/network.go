package libvirt

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// The slices' network: hostd's own libvirt network, never libvirt's
// shared `default`. A bridge whose ports are isolated from each other
// (<port isolated='yes'/>: the kernel bridge's per-port "isolated" flag,
// https://libvirt.org/formatnetwork.html#isolating-ports-from-one-another),
// in "open" forward mode (libvirt adds no firewall rules of its own), with
// no DHCP and no DNS, so libvirt starts no dnsmasq: every guest's address
// comes from its seed. The host's address on the bridge is the slices'
// gateway. hostd/netiso adds the second layer (nftables).

// NetworkSpec is a slice network.
type NetworkSpec struct {
	// Name is the libvirt network's name.
	Name string
	// Bridge is the bridge device libvirt makes (at most 15 bytes).
	Bridge string
	// Gateway is the host's address on the bridge with the slices' prefix
	// length, e.g. 10.77.0.1/16.
	Gateway netip.Prefix
}

var bridgeNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,14}$`)

type networkXML struct {
	XMLName xml.Name            `xml:"network"`
	Name    string              `xml:"name"`
	Forward networkForwardXML   `xml:"forward"`
	Bridge  networkBridgeXML    `xml:"bridge"`
	Port    *networkPortXML     `xml:"port"`
	DNS     networkDNSXML       `xml:"dns"`
	IPs     []networkAddressXML `xml:"ip"`
}

type networkForwardXML struct {
	Mode string `xml:"mode,attr"`
}

type networkBridgeXML struct {
	Name string `xml:"name,attr"`
	STP  string `xml:"stp,attr,omitempty"`
}

type networkPortXML struct {
	Isolated string `xml:"isolated,attr"`
}

type networkDNSXML struct {
	Enable string `xml:"enable,attr"`
}

type networkAddressXML struct {
	Address string `xml:"address,attr"`
	Prefix  int    `xml:"prefix,attr,omitempty"`
	// DHCP is only read back, to refuse a network that has it.
	DHCP *struct{} `xml:"dhcp"`
}

// NetworkXML renders spec as a libvirt network definition.
func NetworkXML(spec NetworkSpec) ([]byte, error) {
	if err := validateName(spec.Name); err != nil {
		return nil, err
	}
	if spec.Name == "default" {
		return nil, fmt.Errorf("%w: the slice network must not be libvirt's shared default network", host.ErrInvalidSpec)
	}
	if !bridgeNameRE.MatchString(spec.Bridge) {
		return nil, fmt.Errorf("%w: bridge name %q: want 1-15 letters, digits, '_', '.' or '-'", host.ErrInvalidSpec, spec.Bridge)
	}
	if !spec.Gateway.IsValid() || !spec.Gateway.Addr().Is4() || spec.Gateway.Bits() < 8 || spec.Gateway.Bits() > 30 {
		return nil, fmt.Errorf("%w: gateway %q: want an IPv4 address with a prefix length of 8 to 30", host.ErrInvalidSpec, spec.Gateway)
	}
	n := networkXML{
		Name:    spec.Name,
		Forward: networkForwardXML{Mode: "open"},
		Bridge:  networkBridgeXML{Name: spec.Bridge, STP: "off"},
		Port:    &networkPortXML{Isolated: "yes"},
		DNS:     networkDNSXML{Enable: "no"},
		IPs:     []networkAddressXML{{Address: spec.Gateway.Addr().String(), Prefix: spec.Gateway.Bits()}},
	}
	out, err := xml.MarshalIndent(n, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal network %s: %w", spec.Name, err)
	}
	return append(out, '\n'), nil
}

// checkNetworkXML refuses a live network definition that is not an
// isolated slice network: hostd must not put slices on a shared bridge.
func checkNetworkXML(name, desc string) error {
	var n networkXML
	if err := xml.Unmarshal([]byte(desc), &n); err != nil {
		return fmt.Errorf("network %s: read its XML: %w", name, err)
	}
	var why []string
	if n.Port == nil || n.Port.Isolated != "yes" {
		why = append(why, "its ports are not isolated (<port isolated='yes'/>)")
	}
	for _, ip := range n.IPs {
		if ip.DHCP != nil {
			why = append(why, "it runs DHCP (dnsmasq)")
		}
	}
	if n.Forward.Mode == "nat" || n.Forward.Mode == "route" {
		why = append(why, "its forward mode "+n.Forward.Mode+" adds libvirt's own firewall rules")
	}
	if len(why) > 0 {
		return fmt.Errorf("%w: network %s exists but %s; remove it (virsh net-destroy and net-undefine) or name another", ErrNetworkNotIsolated, name, strings.Join(why, ", "))
	}
	return nil
}

// ErrNetworkNotIsolated is EnsureNetwork's answer for an existing network
// of the slice network's name that would let slices reach each other.
var ErrNetworkNotIsolated = errors.New("slice network is not isolated")

// EnsureNetwork defines spec's network (persistent, started with
// libvirtd) unless it exists, starts it unless it runs, and checks that
// the running network isolates its ports.
func (h *Hypervisor) EnsureNetwork(ctx context.Context, spec NetworkSpec) error {
	desc, err := NetworkXML(spec)
	if err != nil {
		return err
	}
	return h.do(ctx, "ensure network", spec.Name, func(lv *golibvirt.Libvirt) error {
		net, err := lv.NetworkLookupByName(spec.Name)
		if hasCode(err, golibvirt.ErrNoNetwork) {
			net, err = lv.NetworkDefineXML(string(desc))
		}
		if err != nil {
			return err
		}
		if err := lv.NetworkSetAutostart(net, 1); err != nil {
			return err
		}
		active, err := lv.NetworkIsActive(net)
		if err != nil {
			return err
		}
		if active == 0 {
			if err := lv.NetworkCreate(net); err != nil {
				return err
			}
		}
		live, err := lv.NetworkGetXMLDesc(net, 0)
		if err != nil {
			return err
		}
		return checkNetworkXML(spec.Name, live)
	})
}

// RemoveNetwork stops and undefines the network; one that does not exist
// is fine.
func (h *Hypervisor) RemoveNetwork(ctx context.Context, name string) error {
	return h.do(ctx, "remove network", name, func(lv *golibvirt.Libvirt) error {
		net, err := lv.NetworkLookupByName(name)
		if hasCode(err, golibvirt.ErrNoNetwork) {
			return nil
		}
		if err != nil {
			return err
		}
		if active, err := lv.NetworkIsActive(net); err == nil && active != 0 {
			if err := lv.NetworkDestroy(net); err != nil {
				return err
			}
		}
		return lv.NetworkUndefine(net)
	})
}

// InterfaceDevice is the host-side device (vnetN) of the running
// domain's NIC with the given MAC: the bridge port hostd/netiso pins.
func (h *Hypervisor) InterfaceDevice(ctx context.Context, domain, mac string) (string, error) {
	var dev string
	err := h.do(ctx, "interface of", domain, func(lv *golibvirt.Libvirt) error {
		dom, err := lv.DomainLookupByName(domain)
		if err != nil {
			return err
		}
		desc, err := lv.DomainGetXMLDesc(dom, 0)
		if err != nil {
			return err
		}
		var d struct {
			Interfaces []struct {
				MAC    macXML `xml:"mac"`
				Target struct {
					Dev string `xml:"dev,attr"`
				} `xml:"target"`
			} `xml:"devices>interface"`
		}
		if err := xml.Unmarshal([]byte(desc), &d); err != nil {
			return fmt.Errorf("read domain XML: %w", err)
		}
		for _, i := range d.Interfaces {
			if strings.EqualFold(i.MAC.Address, mac) && i.Target.Dev != "" {
				dev = i.Target.Dev
				return nil
			}
		}
		return fmt.Errorf("no running interface with MAC %s", mac)
	})
	return dev, err
}

// NetworkBridge is the bridge device of the running network name (which
// may have been made by another than hostd, with another bridge name).
func (h *Hypervisor) NetworkBridge(ctx context.Context, name string) (string, error) {
	var bridge string
	err := h.do(ctx, "bridge of", name, func(lv *golibvirt.Libvirt) error {
		net, err := lv.NetworkLookupByName(name)
		if err != nil {
			return err
		}
		desc, err := lv.NetworkGetXMLDesc(net, 0)
		if err != nil {
			return err
		}
		var n networkXML
		if err := xml.Unmarshal([]byte(desc), &n); err != nil {
			return fmt.Errorf("read network XML: %w", err)
		}
		if bridge = n.Bridge.Name; bridge == "" {
			return fmt.Errorf("network %s has no bridge", name)
		}
		return nil
	})
	return bridge, err
}
