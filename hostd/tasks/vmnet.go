package tasks

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/gpuaas/gpuaas/hostd/netiso"
)

// SliceNet is the slices' isolated network on a real host
// (docs/slices.md): the libvirt network the VMs' NICs join, made by
// hostd/libvirt's EnsureNetwork, and the nftables table that pins each
// VM's port (hostd/netiso). Env.SliceNet nil keeps libvirt's "default"
// network and no table (the sim, whose VMs have no NIC).
type SliceNet struct {
	// Network is the libvirt network's name.
	Network string
	// Ports is the nftables table.
	Ports SlicePorts
	// SysClassNet lists the host's interfaces, where a VM's tap is found
	// by its MAC; /sys/class/net when empty.
	SysClassNet string
}

// SlicePorts is what provisioning and release need of hostd/netiso's
// table; *netiso.Firewall implements it.
type SlicePorts interface {
	AddPort(ctx context.Context, p netiso.Port) error
	RemoveMAC(ctx context.Context, mac string) error
}

// serialLogPath is where a guest's serial console is logged: in its seed
// directory, which release and a failed provisioning remove.
func serialLogPath(paths SlicePaths) string { return filepath.Join(paths.SeedDir, "serial.log") }

// sliceNetwork is the libvirt network a slice VM's NIC joins.
func sliceNetwork(env *Env) string {
	if env.SliceNet != nil && env.SliceNet.Network != "" {
		return env.SliceNet.Network
	}
	return "default"
}

// registerSlicePort lets the started VM's port send from its slot's MAC
// and IP, and nothing else (a no-op without a SliceNet).
func registerSlicePort(ctx context.Context, env *Env, mac, slotIP string) error {
	n := env.SliceNet
	if n == nil || n.Ports == nil {
		return nil
	}
	dir := n.SysClassNet
	if dir == "" {
		dir = "/sys/class/net"
	}
	dev, err := netiso.TapDevice(dir, mac)
	if err != nil {
		return fmt.Errorf("pin slice port: %w", err)
	}
	ip, err := slotNetwork(slotIP)
	if err != nil {
		return err
	}
	if err := n.Ports.AddPort(ctx, netiso.Port{Dev: dev, MAC: mac, IP: ip.Addr()}); err != nil {
		return fmt.Errorf("pin slice port: %w", err)
	}
	return nil
}

// releaseSlicePort removes the port entries of the VM's NIC; none is fine.
func releaseSlicePort(ctx context.Context, env *Env, mac string) error {
	n := env.SliceNet
	if n == nil || n.Ports == nil {
		return nil
	}
	if err := n.Ports.RemoveMAC(ctx, mac); err != nil {
		return fmt.Errorf("unpin slice port: %w", err)
	}
	return nil
}
