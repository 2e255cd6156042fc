package faults

import (
	"context"
	"log/slog"
	"time"

	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Applier applies the GPU faults nodes report, each in a transaction of its
// own (ApplyFault). controld/hosts, which checks the reports, hands them
// over through its FaultApplier interface.
type Applier struct {
	Pool *pgxpool.Pool
	// Log tells operators of each slot a fault quarantined.
	Log *slog.Logger
}

// Apply applies fault f node nodeID reported, once: a fault applied before
// is acknowledged without effect.
func (h Applier) Apply(ctx context.Context, nodeID string, f hostproto.GPUFault, now time.Time) error {
	var out Outcome
	err := pgx.BeginFunc(ctx, h.Pool, func(tx pgx.Tx) error {
		var err error
		out, err = ApplyFault(ctx, tx, nodeID, f, now)
		return err
	})
	if err != nil {
		return err
	}
	if !out.Duplicate && h.Log != nil {
		h.Log.Warn("GPU fault: slot quarantined", "node", nodeID, "gpu", f.GPU, "fault", f.What(),
			"allocation", out.AllocationID, "credit_minor", out.Credit.Entry.AmountMinor)
	}
	return nil
}
