package hosts

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/health"
	"github.com/gpuaas/gpuaas/internal/api"
)

type gpuFault struct{ api.GPUFault }

func (f *gpuFault) node() string { return f.NodeID }

// handleFault applies a GPU fault a node reports (controld/health), once:
// hostd resends a fault until it is acknowledged, and a resend is
// acknowledged without effect.
func (d *Service) handleFault(ctx context.Context, m *nats.Msg) (any, error) {
	var f gpuFault
	nodeID, err := d.openReport(ctx, m, &f)
	if err != nil {
		return nil, err
	}
	if f.GPU == "" || f.XID <= 0 || f.At.IsZero() {
		return nil, api.Errorf(api.CodeInvalidArgument, "a fault report needs a GPU, an XID and a time")
	}
	var out health.Outcome
	err = pgx.BeginFunc(ctx, d.cfg.Pool, func(tx pgx.Tx) error {
		out, err = health.ApplyFault(ctx, tx, nodeID, f.GPUFault, d.now())
		return err
	})
	if err != nil {
		return nil, err
	}
	if !out.Duplicate {
		d.cfg.Log.Warn("GPU fault: slot quarantined", "node", nodeID, "gpu", f.GPU, "xid", f.XID,
			"allocation", out.AllocationID, "credit_minor", out.Credit.Entry.AmountMinor)
	}
	return api.HostAck{OK: true}, nil
}
