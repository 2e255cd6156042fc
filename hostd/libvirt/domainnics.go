package libvirt

import (
	"context"
	"encoding/xml"
	"fmt"

	golibvirt "github.com/digitalocean/go-libvirt"
)

// NIC is one network interface of a domain: the libvirt network it is
// on (empty for an interface not on a libvirt network) and its MAC.
type NIC struct {
	Network string
	MAC     string
}

// DomainNICs lists the interfaces of the domain name from its current
// definition (the live one when it runs).
func (h *Hypervisor) DomainNICs(ctx context.Context, name string) ([]NIC, error) {
	var nics []NIC
	err := h.do(ctx, "interfaces of", name, func(lv *golibvirt.Libvirt) error {
		dom, err := lv.DomainLookupByName(name)
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
				Source struct {
					Network string `xml:"network,attr"`
				} `xml:"source"`
			} `xml:"devices>interface"`
		}
		if err := xml.Unmarshal([]byte(desc), &d); err != nil {
			return fmt.Errorf("read domain XML: %w", err)
		}
		for _, i := range d.Interfaces {
			// A running domain's live XML may say type='bridge' for a
			// network's interface and keep the network in the source.
			nics = append(nics, NIC{Network: i.Source.Network, MAC: i.MAC.Address})
		}
		return nil
	})
	return nics, err
}
