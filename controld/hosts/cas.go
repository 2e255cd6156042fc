package hosts

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/api"
)

// handleCAs answers a node asking which keys sign gateway tickets (the
// internal CA, every trusted key during a rotation). The request is signed
// by the node like a pull, and single-use like every report; hostd asks at start and again from
// time to time, so a rotation reaches it without a restart.
func (d *Service) handleCAs(ctx context.Context, m *nats.Msg) (*api.SSHCAsResponse, error) {
	var p pull
	if _, err := d.openReport(ctx, m, &p); err != nil {
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
