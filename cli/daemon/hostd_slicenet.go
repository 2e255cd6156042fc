package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/spf13/pflag"

	"github.com/gpuaas/gpuaas/hostd/libvirt"
	"github.com/gpuaas/gpuaas/hostd/slicehost"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
)

// sliceFlags are how a real hostd runs slice guests (docs/slices.md): its
// own isolated libvirt network and nftables table, made or found at start
// (hostd/slicehost), and the node's declarations (emulated guests, no
// passthrough).
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

// check validates the flags before anything starts.
func (s *sliceFlags) check() error {
	if s.Network == "" {
		return nil
	}
	_, err := s.config()
	return err
}

// config is the flags as hostd/slicehost's Config.
func (s *sliceFlags) config() (slicehost.Config, error) {
	subnet, err := netip.ParsePrefix(s.Subnet)
	if err == nil {
		_, err = slicehost.Gateway(subnet)
	}
	if err != nil {
		return slicehost.Config{}, fmt.Errorf("--slice-subnet %q: want an IPv4 network such as %s", s.Subnet, api.DefaultSlotSubnet)
	}
	return slicehost.Config{Network: s.Network, Bridge: s.Bridge, Subnet: subnet, Emulate: s.Emulate,
		Passthrough: s.Passthrough, Table: s.table, SysClassNet: s.SysClassNet}, nil
}

// sliceHost sets up the slices' network and table (hostd/slicehost).
func (s *sliceFlags) sliceHost(ctx context.Context, hv *libvirt.Hypervisor, log *slog.Logger) (*tasks.SliceNet, *tasks.SliceHost) {
	cfg, _ := s.config() // checked by check; an empty network is Setup's blocker
	return slicehost.Setup(ctx, hv, cfg, log)
}
