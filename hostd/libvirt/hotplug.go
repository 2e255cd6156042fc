package libvirt

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"strings"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// Hot plug of a running domain's disks (docs/decisions/0055-hot-attach.md):
// a volume's image is added to, and removed from, the live domain only
// (VIR_DOMAIN_AFFECT_LIVE, https://libvirt.org/html/libvirt-libvirt-domain.html#virDomainAttachDeviceFlags);
// the persistent definition keeps the disks the slice booted with, so a
// domain started again never finds a volume it was not given at define.

// ErrDiskBusy is a detach the guest has not completed: the disk is still
// in the live domain when the caller's context ends.
var ErrDiskBusy = errors.New("the guest has not released the disk")

// detachPoll is how often DetachDisk looks whether the guest let go.
const detachPoll = 100 * time.Millisecond

// liveDisksXML is the part of a live domain's XML DetachDisk and
// AttachDisk read.
type liveDisksXML struct {
	Disks []diskXML `xml:"devices>disk"`
}

// liveDisks are the disks of domain dom as it runs.
func liveDisks(lv *golibvirt.Libvirt, dom golibvirt.Domain) ([]diskXML, error) {
	s, err := lv.DomainGetXMLDesc(dom, 0)
	if err != nil {
		return nil, err
	}
	var d liveDisksXML
	if err := xml.Unmarshal([]byte(s), &d); err != nil {
		return nil, fmt.Errorf("read domain XML: %w", err)
	}
	return d.Disks, nil
}

// diskDeviceXML is d as the <disk> device element attach and detach
// take.
func diskDeviceXML(d diskXML) (string, error) {
	var b strings.Builder
	if err := xml.NewEncoder(&b).EncodeElement(d, xml.StartElement{Name: xml.Name{Local: "disk"}}); err != nil {
		return "", fmt.Errorf("marshal disk: %w", err)
	}
	return b.String(), nil
}

// freeTarget is the first virtio disk name disks leave free.
func freeTarget(disks []diskXML) string {
	used := map[string]bool{}
	for _, d := range disks {
		used[d.Target.Dev] = true
	}
	for c := 'b'; c <= 'z'; c++ {
		if t := "vd" + string(c); !used[t] {
			return t
		}
	}
	return ""
}

// AttachDisk hot-plugs disk into running domain name as a virtio disk. A
// disk needs a Serial (it is how the guest finds it and how DetachDisk
// names it); an empty Target takes the first free vdX. A disk with the
// same serial and source already there is success (a retry); with another
// source it is host.ErrInvalidSpec.
func (h *Hypervisor) AttachDisk(ctx context.Context, name string, disk host.Disk) error {
	if disk.Serial == "" || len(disk.Serial) > 20 || disk.Source == "" {
		return fmt.Errorf("attach disk to %s: %w: a serial of 1 to 20 bytes and a source are required", name, host.ErrInvalidSpec)
	}
	return h.do(ctx, "attach disk to", name, func(lv *golibvirt.Libvirt) error {
		dom, err := lv.DomainLookupByName(name)
		if err != nil {
			return err
		}
		disks, err := liveDisks(lv, dom)
		if err != nil {
			return err
		}
		want := diskElement(disk)
		for _, d := range disks {
			if d.Serial != disk.Serial {
				continue
			}
			if d.Source == want.Source {
				return nil
			}
			return fmt.Errorf("%w: a disk with serial %s is attached from another source", host.ErrInvalidSpec, disk.Serial)
		}
		if disk.Target == "" {
			if disk.Target = freeTarget(disks); disk.Target == "" {
				return fmt.Errorf("%w: no free virtio disk name", host.ErrInvalidSpec)
			}
			want = diskElement(disk)
		}
		x, err := diskDeviceXML(want)
		if err != nil {
			return err
		}
		return lv.DomainAttachDeviceFlags(dom, x, uint32(golibvirt.DomainAffectLive))
	})
}

// DetachDisk asks running domain name's guest to let go of the disk with
// serial and waits, until ctx ends, for the disk to leave the live
// domain: QEMU removes a virtio disk only when the guest acknowledges the
// unplug (libvirt waits a few seconds and then returns with the request
// pending). No disk with that serial is success. When ctx ends first the
// error wraps ErrDiskBusy and the request stays pending in the guest.
func (h *Hypervisor) DetachDisk(ctx context.Context, name, serial string) error {
	if serial == "" {
		return fmt.Errorf("detach disk from %s: %w: no serial", name, host.ErrInvalidSpec)
	}
	present := func() (bool, error) {
		var found bool
		err := h.do(ctx, "detach disk from", name, func(lv *golibvirt.Libvirt) error {
			dom, err := lv.DomainLookupByName(name)
			if err != nil {
				return err
			}
			disks, err := liveDisks(lv, dom)
			if err != nil {
				return err
			}
			for _, d := range disks {
				if d.Serial == serial {
					found = true
				}
			}
			return nil
		})
		return found, err
	}
	err := h.do(ctx, "detach disk from", name, func(lv *golibvirt.Libvirt) error {
		dom, err := lv.DomainLookupByName(name)
		if err != nil {
			return err
		}
		disks, err := liveDisks(lv, dom)
		if err != nil {
			return err
		}
		for _, d := range disks {
			if d.Serial != serial {
				continue
			}
			x, err := diskDeviceXML(d)
			if err != nil {
				return err
			}
			return lv.DomainDetachDeviceFlags(dom, x, uint32(golibvirt.DomainAffectLive))
		}
		return nil
	})
	if err != nil {
		return err
	}
	t := time.NewTicker(detachPoll)
	defer t.Stop()
	for {
		found, err := present()
		if err != nil {
			return err
		}
		if !found {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("detach disk %s from %s: %w: %w", serial, name, ErrDiskBusy, ctx.Err())
		case <-t.C:
		}
	}
}
