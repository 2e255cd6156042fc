package allocapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// topTimeout bounds the wait for a node's answer, like node.logs's: a
// hung node is reported as such.
const topTimeout = 3 * time.Second

// top asks the allocation's node for the latest telemetry of the
// allocation's GPUs, and only those, over hostproto.MsgTop, which only
// that node's hostd may subscribe to (docs/gpu-telemetry.md). Whoever
// may get the allocation may read it.
func (h handlers) top(ctx context.Context, r *endpoint.Request, req api.AllocRef) (*api.AllocTopResponse, error) {
	a, err := alloc.Get(ctx, h.DB, alloc.ActorOf(r.Principal), req.ID)
	if err != nil {
		return nil, err
	}
	if a.State != api.AllocActive || a.NodeID == "" || len(a.Slots) == 0 {
		e := api.Errorf(api.CodeConflict, "allocation %s is %s: it has no GPUs to watch", a.ID, a.State)
		if a.State == api.AllocRequested || a.State == api.AllocProvisioning {
			e = e.WithHint("wait until it is active: gpuaas alloc get " + a.ID)
		}
		return nil, e
	}
	pcis := make([]string, 0, len(a.Slots))
	for _, sl := range a.Slots {
		pcis = append(pcis, sl.GPUPCI)
	}
	slices.Sort(pcis)
	ctx, cancel := context.WithTimeout(ctx, topTimeout)
	defer cancel()
	hresp, err := hostproto.Ask(ctx, h.NATS, hostproto.MsgTop, a.NodeID, hostproto.HostTopRequest{PCIs: pcis})
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return nil, api.Errorf(api.CodeUnavailable, "the node of allocation %s is not answering", a.ID).
			WithHint("try again shortly; if it persists, tell an operator")
	}
	if err != nil {
		return nil, fmt.Errorf("ask node %s for GPU telemetry: %w", a.NodeID, err)
	}
	resp := api.AllocTopResponse{AllocationID: a.ID, GPUs: []api.GPUSample{}}
	// Keep only what was asked for, numbered by position in the
	// allocation: a node answering about other GPUs must not leak them.
	for _, g := range hresp.GPUs {
		if i := slices.Index(pcis, g.PCI); i >= 0 {
			g.Index = i
			resp.GPUs = append(resp.GPUs, g)
		}
	}
	slices.SortFunc(resp.GPUs, func(x, y api.GPUSample) int { return x.Index - y.Index })
	if len(resp.GPUs) == 0 && hresp.Error != "" {
		return nil, api.Errorf(api.CodeUnavailable, "no GPU telemetry from the node of allocation %s: %s", a.ID, hresp.Error)
	}
	return &resp, nil
}
