package hosts

import (
	"context"
	"math"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

type gpuFault struct{ hostproto.GPUFault }

func (f *gpuFault) node() string                 { return f.NodeID }
func (f *gpuFault) payload() *hostproto.GPUFault { return &f.GPUFault }

// handleFault applies a GPU fault a node reports (Faults, controld/faults), once:
// hostd resends a fault until it is acknowledged, and a resend is
// acknowledged without effect.
func (d *Service) handleFault(ctx context.Context, in hostproto.Inbound[hostproto.Sealed[hostproto.GPUFault], hostproto.HostAck]) (*hostproto.HostAck, error) {
	var f gpuFault
	nodeID, err := openReport(ctx, d, in, &f)
	if err != nil {
		return nil, err
	}
	if err := checkFault(f.GPUFault); err != nil {
		return nil, err
	}
	if err := d.cfg.Faults.Apply(ctx, nodeID, f.GPUFault, d.now()); err != nil {
		return nil, err
	}
	return &hostproto.HostAck{OK: true}, nil
}

// checkFault refuses a fault report that names no GPU or time, or that is
// neither an XID (a code, no ECC count) nor an ECC fault (a count, no XID).
func checkFault(f hostproto.GPUFault) error {
	if f.GPU == "" || f.At.IsZero() {
		return api.Errorf(api.CodeInvalidArgument, "a fault report needs a GPU and a time")
	}
	switch f.FaultKind {
	case "", hostproto.GPUFaultXID:
		if f.XID <= 0 || f.ECCUncorrected != 0 {
			return api.Errorf(api.CodeInvalidArgument, "an XID fault report needs an XID and no ECC count")
		}
	case hostproto.GPUFaultECC:
		if f.XID != 0 || f.ECCUncorrected == 0 || f.ECCUncorrected > math.MaxInt64 {
			return api.Errorf(api.CodeInvalidArgument, "an ECC fault report needs an ECC count and no XID")
		}
	default:
		return api.Errorf(api.CodeInvalidArgument, "unknown fault kind %q", f.FaultKind)
	}
	return nil
}
