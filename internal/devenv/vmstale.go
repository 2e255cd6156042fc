package devenv

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gpuaas/gpuaas/hostd/netiso"
	"github.com/gpuaas/gpuaas/hostd/tasks"
)

// clearStale removes what an earlier `gpuaas dev --vm` on this machine
// left — it crashed, or its caller killed it before the slices were
// released: every guest on dev's slice network (destroyed and
// undefined) and every entry of dev's nft table. Dev's slots have fixed
// MACs and addresses, so a left guest would answer for the next run's
// first slice (docs/slices.md, "Guests left behind").
//
// Scope: only names dev owns — its network, its table — and only under
// the machine's dev --vm lock (vmlock.go), so no other dev's guests run
// there. A node's slice network and the tests' networks are not
// touched. Dev calls it at start and again when it stops.
func (v *vmHost) clearStale(ctx context.Context, log *slog.Logger) error {
	var ports tasks.SlicePorts
	if v.net != nil {
		ports = v.net.Ports
	}
	cleared, err := tasks.ClearNetworkGuests(ctx, v.hv, devSliceNetwork, ports)
	if len(cleared) > 0 {
		log.Warn("removed guests an earlier gpuaas dev --vm left on its slice network",
			"network", devSliceNetwork, "domains", cleared)
	}
	if err != nil {
		return err
	}
	fw, err := netiso.New(netiso.Config{Table: devSliceTable})
	if err != nil {
		return fmt.Errorf("clear stale nft entries: %w", err)
	}
	left, err := fw.Ports(ctx)
	if err != nil {
		return fmt.Errorf("clear stale nft entries: %w", err)
	}
	for _, p := range left {
		if err := fw.RemovePort(ctx, p.Dev); err != nil {
			return fmt.Errorf("clear stale nft entries: %w", err)
		}
	}
	if len(left) > 0 {
		log.Warn("removed stale entries from dev's nft table", "table", devSliceTable, "entries", len(left))
	}
	return nil
}

// clearOnStop is clearStale for dev's stop: the control plane that
// would release its guests is going away with it.
func (v *vmHost) clearOnStop(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := v.clearStale(ctx, log); err != nil {
		log.Error("guests left on dev's slice network", "err", err)
	}
}
