package controld

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// nodeLogsTimeout bounds the wait for a node's answer: under the client's
// api.DefaultAttemptTimeout, so a hung node is reported as such rather
// than taken for a controld that does not answer (and retried).
const nodeLogsTimeout = 3 * time.Second

// nodeLogs asks a node's hostd for its recent log records over
// hostproto.MsgLogs, which only that hostd may subscribe to.
func (s *Server) nodeLogs(ctx context.Context, c *call, req api.NodeLogsRequest) (*api.NodeLogsResponse, error) {
	hreq := hostproto.HostLogsRequest{After: req.After, Limit: req.Limit}
	if req.Since != "" {
		d, err := time.ParseDuration(req.Since)
		if err != nil || d <= 0 {
			return nil, api.Errorf(api.CodeInvalidArgument, "since %q is not a positive duration", req.Since).
				WithHint("use e.g. 10m, 1h30m")
		}
		hreq.SinceTime = s.now().Add(-d)
	}
	if req.Limit < 0 || req.Limit > api.MaxNodeLogsLimit {
		return nil, api.Errorf(api.CodeInvalidArgument, "limit must be between 0 and %d, got %d", api.MaxNodeLogsLimit, req.Limit)
	}
	d, err := node.Get(ctx, s.pool, req.Node)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, nodeLogsTimeout)
	defer cancel()
	resp, err := hostproto.Ask(ctx, s.cfg.NATS, hostproto.MsgLogs, d.Node.ID, hreq)
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
