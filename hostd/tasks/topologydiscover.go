package tasks

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/gpuaas/gpuaas/hostd/topology"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// PhaseDiscover is the one phase of slice.topology_discover.
const PhaseDiscover = "discover"

// topologyDiscover reports the host's hardware and the slots it proposes
// for the shape; it never registers anything.
func topologyDiscover(ctx context.Context, env *Env, p hostproto.TopologyDiscoverParams, rep Reporter) (any, error) {
	opts := topology.Options{Shape: p.Shape, HostName: env.NodeName}
	if p.Subnet != "" {
		subnet, err := netip.ParsePrefix(p.Subnet)
		if err != nil {
			return nil, fmt.Errorf("%w: subnet %q: %w", ErrInvalidParams, p.Subnet, err)
		}
		opts.Subnet = subnet
	}
	var res api.TopologyResult
	err := NewPhased(env, rep).Run(ctx, PhaseDiscover, func(ctx context.Context) error {
		var err error
		res, err = topology.Discover(env.Topology, opts)
		res.Blockers = append(res.Blockers, sliceHostBlockers(env, p.Shape)...)
		if err == nil {
			err = addGPUUUIDs(ctx, env, &res) // gpuinventory.go
		}
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	return res, nil
}
