package hosts

import (
	"context"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// handleCAs answers a node asking which keys sign gateway tickets (the
// internal CA, every trusted key during a rotation). The request is signed
// by the node like a pull, and single-use like every report; hostd asks at start and again from
// time to time, so a rotation reaches it without a restart.
func (d *Service) handleCAs(ctx context.Context, in hostproto.Inbound[hostproto.Sealed[hostproto.PullRequest], api.SSHCAsResponse]) (*api.SSHCAsResponse, error) {
	var p pull
	if _, err := openReport(ctx, d, in, &p); err != nil {
		return nil, err
	}
	if d.cfg.TicketCAKeys == nil {
		return nil, api.Errorf(api.CodeUnavailable, "controld has no ticket CA")
	}
	keys, err := d.cfg.TicketCAKeys(ctx)
	if err != nil {
		return nil, err
	}
	return &api.SSHCAsResponse{User: []string{}, Host: []string{}, Internal: keys}, nil
}
