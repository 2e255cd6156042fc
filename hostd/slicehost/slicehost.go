// Package slicehost sets up what real slice guests need on a node, at
// hostd's start (docs/slices.md): the slices' isolated libvirt network
// (hostd/libvirt EnsureNetwork) and the nftables bridge table that pins
// each guest's port (hostd/netiso), and the node's declarations (emulated
// guests, no passthrough). `gpuaas hostd` and `gpuaas dev --vm` share it.
package slicehost

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/gpuaas/gpuaas/hostd/libvirt"
	"github.com/gpuaas/gpuaas/hostd/netiso"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Config is the node's slice setup.
type Config struct {
	// Network is the libvirt network; "" declares a node without one (it
	// cannot run slices: a blocker says so).
	Network string
	// Bridge is its bridge device when hostd makes it.
	Bridge string
	// Subnet is the slot network; the host's address on the bridge is its
	// first address.
	Subnet netip.Prefix
	// Emulate runs guests under TCG; Passthrough hands the slots' devices
	// to them (tasks.SliceHost).
	Emulate     bool
	Passthrough bool
	// Table is the nftables table; netiso.DefaultTable when empty.
	Table string
	// SysClassNet is where bridges and taps are looked up;
	// /sys/class/net when empty.
	SysClassNet string
	// LookPath finds the programs the node needs (nft, dnsmasq);
	// exec.LookPath when nil.
	LookPath func(string) (string, error)
}

// dnsmasqAt is where Debian's dnsmasq-base puts dnsmasq: libvirtd finds it
// there whatever hostd's PATH is.
const dnsmasqAt = "/usr/sbin/dnsmasq"

// Gateway is the host's address on the slice bridge: the subnet's first
// address, with its prefix length.
func Gateway(subnet netip.Prefix) (netip.Prefix, error) {
	if !subnet.IsValid() || !subnet.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("slice subnet %q: want an IPv4 network such as %s", subnet, api.DefaultSlotSubnet)
	}
	subnet = subnet.Masked()
	return netip.PrefixFrom(subnet.Addr().Next(), subnet.Bits()), nil
}

// Setup makes or finds the network and installs the table. What fails
// becomes a blocker the node reports in its topology, and vm_provision
// refuses while any stands; hostd keeps running (its other tasks, and a
// fix followed by a restart, need it). The SliceNet is nil unless both
// are in place.
func Setup(ctx context.Context, hv *libvirt.Hypervisor, cfg Config, log *slog.Logger) (*tasks.SliceNet, *tasks.SliceHost) {
	sh := &tasks.SliceHost{Emulate: cfg.Emulate}
	if !cfg.Passthrough {
		sh.NoPassthrough = "the node declares no passthrough devices (--passthrough=false)"
	}
	block := func(code api.BlockerCode, device, msg string) {
		log.Error("slice host", "blocker", code, "err", msg)
		sh.Blockers = append(sh.Blockers, api.Blocker{Code: code, Device: device, Message: msg})
	}
	if cfg.Network == "" {
		block(tasks.BlockerSliceNetwork, "", "no slice network (--slice-network is empty): this node cannot run slice VMs")
		return nil, sh
	}
	lookPath := cfg.LookPath
	if lookPath == nil {
		lookPath = func(name string) (string, error) {
			p, err := exec.LookPath(name)
			if err != nil && name == "dnsmasq" {
				if _, serr := os.Stat(dnsmasqAt); serr == nil {
					return dnsmasqAt, nil
				}
			}
			return p, err
		}
	}
	nft, err := lookPath("nft")
	if err != nil {
		block(api.BlockerCommandMissing, "nft", "nft is not on PATH (apt-get install nftables): slices' bridge ports cannot be pinned")
	}
	// The slice network runs no dnsmasq, but libvirtd 9.0 without the
	// binary segfaults at start-up reloading an active network: a restarted
	// libvirtd would never come back while slices run.
	if _, err := lookPath("dnsmasq"); err != nil {
		block(api.BlockerCommandMissing, "dnsmasq", "dnsmasq is not installed (apt-get install dnsmasq-base): "+
			"libvirtd cannot restart while the slice network is active without it")
	}
	gw, err := Gateway(cfg.Subnet)
	if err == nil {
		err = hv.EnsureNetwork(ctx, libvirt.NetworkSpec{Name: cfg.Network, Bridge: cfg.Bridge, Gateway: gw})
	}
	var bridge string
	if err == nil {
		bridge, err = hv.NetworkBridge(ctx, cfg.Network)
	}
	if err == nil {
		dir := cmp.Or(cfg.SysClassNet, "/sys/class/net")
		if _, err = os.Stat(filepath.Join(dir, bridge, "bridge")); err != nil {
			err = fmt.Errorf("%s is not a bridge here (is the bridge kernel module loaded? modprobe bridge): %w", bridge, err)
		}
	}
	if err != nil {
		block(tasks.BlockerSliceNetwork, cfg.Network, fmt.Sprintf("libvirt network %s: %v", cfg.Network, err))
		return nil, sh
	}
	if nft == "" {
		return nil, sh
	}
	fw, err := netiso.New(netiso.Config{NFT: nft, Table: cfg.Table})
	if err == nil {
		err = fw.Install(ctx)
	}
	if err != nil {
		block(tasks.BlockerSliceNetwork, "nftables", fmt.Sprintf("nftables bridge table: %v", err))
		return nil, sh
	}
	log.Info("slice network ready", "network", cfg.Network, "bridge", bridge, "gateway", gw,
		"table", cmp.Or(cfg.Table, netiso.DefaultTable), "emulate", cfg.Emulate, "passthrough", cfg.Passthrough)
	return &tasks.SliceNet{Network: cfg.Network, Ports: fw, SysClassNet: cfg.SysClassNet}, sh
}
