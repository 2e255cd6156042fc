package hosts

import (
	"context"
	"crypto/ed25519"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
)

// enroll registers a node with a one-time token (node.Enroll), audits it,
// tells operators, and answers the node with the keys that sign its tasks.
func (d *Service) enroll(ctx context.Context, req api.EnrollRequest) (api.EnrollResponse, error) {
	if len(req.PublicKey) != ed25519.PublicKeySize {
		return api.EnrollResponse{}, api.Errorf(api.CodeInvalidArgument, "public_key must be an Ed25519 key")
	}
	now := d.now()
	var resp api.EnrollResponse
	err := pgx.BeginFunc(ctx, d.cfg.Pool, func(tx pgx.Tx) error {
		n, err := node.Enroll(ctx, tx, req, d.cfg.SlotSubnet, now)
		if err != nil {
			return err
		}
		if err := audit.Write(ctx, tx, audit.Meta{At: now, ActorID: "node:" + n.ID}, audit.Entry{
			Action: "node.enroll", TargetType: "node", TargetID: n.ID, Detail: map[string]string{"name": n.Name, "hostname": req.Hostname}}); err != nil {
			return err
		}
		if _, err := outbox.Enqueue(ctx, tx, now, outbox.Event{Kind: api.EventNode, Subject: n.ID,
			Payload: map[string]string{"node_id": n.ID, "name": n.Name, "state": api.NodeEnrolled}}); err != nil {
			return err
		}
		resp = api.EnrollResponse{NodeID: n.ID, Name: n.Name, Shape: n.Shape, TaskKeys: [][]byte{d.cfg.TaskKey.Public().(ed25519.PublicKey)},
			HeartbeatInterval: d.cfg.HeartbeatInterval}
		return nil
	})
	return resp, err
}
