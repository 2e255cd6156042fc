package hosts

import (
	"context"
	"crypto/ed25519"

	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// enroll registers a node (Nodes.Enroll: its token, audit row and event)
// and answers it with the keys that sign its tasks.
func (d *Service) enroll(ctx context.Context, req hostproto.EnrollRequest) (hostproto.EnrollResponse, error) {
	resp, err := d.cfg.Nodes.Enroll(ctx, req, d.now())
	if err != nil {
		return hostproto.EnrollResponse{}, err
	}
	resp.TaskKeys = [][]byte{d.cfg.TaskKey.Public().(ed25519.PublicKey)}
	resp.HeartbeatInterval = d.cfg.HeartbeatInterval
	return resp, nil
}
