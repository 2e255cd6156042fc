package controld

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// inventoryReports is node.Reports that also checks, with each
// heartbeat's health report, that the node still holds its volumes
// (volumes.CheckInventory): a node back without a volume fails it, stops
// its charging and tells its project.
type inventoryReports struct {
	node.Reports
}

// Heartbeat records the heartbeat (node.Reports), then checks the
// volumes its health lists, in a transaction of its own.
func (r inventoryReports) Heartbeat(ctx context.Context, nodeID string, hb hostproto.Heartbeat, now time.Time) error {
	if err := r.Reports.Heartbeat(ctx, nodeID, hb, now); err != nil || len(hb.Health) == 0 {
		return err
	}
	return pgx.BeginFunc(ctx, r.Pool, func(tx pgx.Tx) error {
		evs, err := volumes.CheckInventory(ctx, tx, nodeID, hb.Health, now)
		if err != nil {
			return err
		}
		ended, err := endLostSessions(ctx, tx, nodeID, hb.Health, now)
		if err != nil {
			return err
		}
		evs = append(evs, ended...)
		for _, ev := range evs {
			if _, err := outbox.Enqueue(ctx, tx, now, ev); err != nil {
				return err
			}
		}
		return nil
	})
}
