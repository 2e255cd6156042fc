package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// quarantine keeps one slot of a node out of placement (operators).
func (h handlers) quarantine(_ context.Context, r *endpoint.Request, req api.NodeQuarantineRequest) (endpoint.Work[api.NodeDetail], error) {
	sel := SlotSelector{Index: req.Slot, GPU: req.GPU}
	if err := CheckSelector(sel, false); err != nil {
		return nil, err
	}
	if err := CheckReason(req.Reason); err != nil {
		return nil, err
	}
	if err := api.CheckText("reason", req.Reason); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.NodeDetail, mutate.Effect, error) {
		d, err := Get(ctx, tx, req.Node)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		slot, already, err := Quarantine(ctx, tx, d.Node.ID, sel, req.Reason, r.Principal.UserID, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if already {
			return nil, mutate.Effect{}, api.Errorf(api.CodeConflict, "slot %d is already quarantined: %s",
				slot.Index, slot.Quarantine.Reason).WithHint("clear it first with `gpuaas node clear`")
		}
		if d, err = Get(ctx, tx, d.Node.ID); err != nil {
			return nil, mutate.Effect{}, err
		}
		return &d, mutate.Effect{
			Audit: audit.Entry{Action: "node.quarantine", TargetType: "node", TargetID: d.Node.ID,
				Detail: map[string]any{"slot": slot.Index, "gpu": slot.GPUPCI, "reason": req.Reason}},
			Events: []outbox.Event{{Kind: api.EventNode, Subject: d.Node.ID, Payload: d.Node}},
		}, nil
	}, nil
}

// clear makes quarantined slots of a node placeable again
// (operators).
func (h handlers) clear(_ context.Context, r *endpoint.Request, req api.NodeClearRequest) (endpoint.Work[api.NodeDetail], error) {
	sel := SlotSelector{Index: req.Slot, GPU: req.GPU}
	if err := CheckSelector(sel, true); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.NodeDetail, mutate.Effect, error) {
		d, err := Get(ctx, tx, req.Node)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		cleared, err := ClearQuarantine(ctx, tx, d.Node.ID, sel)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		if d, err = Get(ctx, tx, d.Node.ID); err != nil {
			return nil, mutate.Effect{}, err
		}
		idx := make([]int, len(cleared))
		for i, sl := range cleared {
			idx[i] = sl.Index
		}
		h.Kick() // queued requests may fit now
		return &d, mutate.Effect{
			Audit: audit.Entry{Action: "node.clear", TargetType: "node", TargetID: d.Node.ID,
				Detail: map[string]any{"slots": idx}},
			Events: []outbox.Event{{Kind: api.EventNode, Subject: d.Node.ID, Payload: d.Node}},
		}, nil
	}, nil
}

// logsTimeout bounds the wait for a node's answer: under the client's
// api.DefaultAttemptTimeout, so a hung node is reported as such rather
// than taken for a controld that does not answer (and retried).
const logsTimeout = 3 * time.Second

// logs asks a node's hostd for its recent log records over
// hostproto.MsgLogs, which only that hostd may subscribe to.
func (h handlers) logs(ctx context.Context, r *endpoint.Request, req api.NodeLogsRequest) (*api.NodeLogsResponse, error) {
	hreq := hostproto.HostLogsRequest{After: req.After, Limit: req.Limit}
	if req.Since != "" {
		d, err := time.ParseDuration(req.Since)
		if err != nil || d <= 0 {
			return nil, api.Errorf(api.CodeInvalidArgument, "since %q is not a positive duration", req.Since).
				WithHint("use e.g. 10m, 1h30m")
		}
		hreq.SinceTime = h.Now().Add(-d)
	}
	if req.Limit < 0 || req.Limit > api.MaxNodeLogsLimit {
		return nil, api.Errorf(api.CodeInvalidArgument, "limit must be between 0 and %d, got %d", api.MaxNodeLogsLimit, req.Limit)
	}
	d, err := Get(ctx, h.DB, req.Node)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, logsTimeout)
	defer cancel()
	resp, err := hostproto.Ask(ctx, h.NATS, hostproto.MsgLogs, d.Node.ID, hreq)
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return nil, api.Errorf(api.CodeUnavailable, "node %s is not answering", d.Node.Name).
			WithHint("check that its hostd is running and connected")
	}
	if err != nil {
		return nil, fmt.Errorf("ask node %s for logs: %w", d.Node.ID, err)
	}
	resp.Node = d.Node.ID
	if resp.Records == nil {
		resp.Records = []api.LogRecord{}
	}
	return resp, nil
}
