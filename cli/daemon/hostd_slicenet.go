package daemon

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/gpuaas/gpuaas/hostd/libvirt"
	"github.com/gpuaas/gpuaas/hostd/netiso"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
)

// sliceFlags are how a real hostd runs slice guests (docs/slices.md): its
// own isolated libvirt network and nftables table, made or found at start,
// and the node's declarations (emulated guests, no passthrough).
type sliceFlags struct {
	Network     string
	Bridge      string
	Subnet      string
	Emulate     bool
	Passthrough bool
	// SysClassNet is where bridges and taps are looked up; /sys/class/net
	// when empty (tests).
	SysClassNet string
	// table is the nftables table; netiso.DefaultTable when empty (tests
	// use their own).
	table string
}

// DefaultSliceNetwork and DefaultSliceBridge name hostd's slice network.
const (
	DefaultSliceNetwork = "gpuaas-slices"
	DefaultSliceBridge  = "gpuaas-br0"
)

func (s *sliceFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&s.Network, "slice-network", DefaultSliceNetwork,
		"The slices' isolated libvirt network, made at start unless it exists (real hosts; empty: none, a bare-metal node)")
	fl.StringVar(&s.Bridge, "slice-bridge", DefaultSliceBridge, "The bridge device of --slice-network when hostd makes it")
	fl.StringVar(&s.Subnet, "slice-subnet", api.DefaultSlotSubnet,
		"The slot network (controld's slot subnet); the host's address on the bridge is its first address")
	fl.BoolVar(&s.Emulate, "emulate", false,
		"Run slice guests under QEMU's software emulation (TCG), for a machine without usable KVM; not production timings")
	fl.BoolVar(&s.Passthrough, "passthrough", true,
		"Pass the slots' GPUs, VFs and NVMe namespaces through; false declares a node with no passthrough devices")
}

// gateway is the host's address on the slice bridge: the subnet's first
// address, with its prefix length.
func (s *sliceFlags) gateway() (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s.Subnet)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("--slice-subnet %q: want an IPv4 network such as %s", s.Subnet, api.DefaultSlotSubnet)
	}
	p = p.Masked()
	return netip.PrefixFrom(p.Addr().Next(), p.Bits()), nil
}

// check validates the flags before anything starts.
func (s *sliceFlags) check() error {
	if s.Network == "" {
		return nil
	}
	_, err := s.gateway()
	return err
}

// sliceHost sets up what slice guests need on a real host: the isolated
// network (hostd/libvirt EnsureNetwork) and the nftables bridge table
// (hostd/netiso Install). What fails becomes a blocker the node reports
// in its topology, and vm_provision refuses while any stands; hostd keeps
// running (its other tasks, and a later restart, need it).
func (s *sliceFlags) sliceHost(ctx context.Context, hv *libvirt.Hypervisor, log *slog.Logger) (*tasks.SliceNet, *tasks.SliceHost) {
	sh := &tasks.SliceHost{Emulate: s.Emulate}
	if !s.Passthrough {
		sh.NoPassthrough = "the node declares no passthrough devices (--passthrough=false)"
	}
	if s.Network == "" {
		sh.Blockers = append(sh.Blockers, api.Blocker{Code: tasks.BlockerSliceNetwork,
			Message: "no slice network (--slice-network is empty): this node cannot run slice VMs"})
		return nil, sh
	}
	block := func(code api.BlockerCode, device, msg string) {
		log.Error("slice host", "blocker", code, "err", msg)
		sh.Blockers = append(sh.Blockers, api.Blocker{Code: code, Device: device, Message: msg})
	}
	nft, err := exec.LookPath("nft")
	if err != nil {
		block(api.BlockerCommandMissing, "nft", "nft is not on PATH (apt-get install nftables): slices' bridge ports cannot be pinned")
	}
	gw, _ := s.gateway() // checked by check
	err = hv.EnsureNetwork(ctx, libvirt.NetworkSpec{Name: s.Network, Bridge: s.Bridge, Gateway: gw})
	if err != nil {
		block(tasks.BlockerSliceNetwork, s.Network, fmt.Sprintf("libvirt network %s: %v", s.Network, err))
		return nil, sh
	}
	dir := s.SysClassNet
	if dir == "" {
		dir = "/sys/class/net"
	}
	bridge, err := hv.NetworkBridge(ctx, s.Network)
	if err == nil {
		if _, err = os.Stat(filepath.Join(dir, bridge, "bridge")); err != nil {
			err = fmt.Errorf("%s is not a bridge here (is the bridge kernel module loaded? modprobe bridge): %w", bridge, err)
		}
	}
	if err != nil {
		block(tasks.BlockerSliceNetwork, s.Network, fmt.Sprintf("libvirt network %s: %v", s.Network, err))
		return nil, sh
	}
	if nft == "" {
		return nil, sh
	}
	fw, err := netiso.New(netiso.Config{NFT: nft, Table: s.table})
	if err == nil {
		err = fw.Install(ctx)
	}
	if err != nil {
		block(tasks.BlockerSliceNetwork, "nftables", fmt.Sprintf("nftables bridge table: %v", err))
		return nil, sh
	}
	log.Info("slice network ready", "network", s.Network, "bridge", bridge, "gateway", gw, "table", cmp.Or(s.table, netiso.DefaultTable),
		"emulate", s.Emulate, "passthrough", s.Passthrough)
	return &tasks.SliceNet{Network: s.Network, Ports: fw, SysClassNet: s.SysClassNet}, sh
}
