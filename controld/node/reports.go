package node

import (
	"context"
	"crypto/ed25519"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Reports applies what nodes send besides task results: enrollments and
// heartbeats, and gives the keys their reports are checked with.
// controld/hosts, which receives and checks them, calls it through its
// Nodes interface.
type Reports struct {
	Pool *pgxpool.Pool
	// SlotSubnet is passed to a new node's topology discovery.
	SlotSubnet string
}

// Enroll registers a node with a one-time token (Enroll), audits it and
// tells operators, in one transaction. The answer names the node; the
// caller adds what the node is to trust.
func (r Reports) Enroll(ctx context.Context, req hostproto.EnrollRequest, now time.Time) (hostproto.EnrollResponse, error) {
	if len(req.PublicKey) != ed25519.PublicKeySize {
		return hostproto.EnrollResponse{}, api.Errorf(api.CodeInvalidArgument, "public_key must be an Ed25519 key")
	}
	var resp hostproto.EnrollResponse
	err := pgx.BeginFunc(ctx, r.Pool, func(tx pgx.Tx) error {
		n, err := Enroll(ctx, tx, req, r.SlotSubnet, now)
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
		resp = hostproto.EnrollResponse{NodeID: n.ID, Name: n.Name, Shape: n.Shape}
		return nil
	})
	return resp, err
}

// PublicKey is the package's PublicKey, read from the pool.
func (r Reports) PublicKey(ctx context.Context, nodeID string) (ed25519.PublicKey, error) {
	return PublicKey(ctx, r.Pool, nodeID)
}

// Heartbeat records a node's heartbeat: its health and terminal server
// (SetHealth).
func (r Reports) Heartbeat(ctx context.Context, nodeID string, hb hostproto.Heartbeat, now time.Time) error {
	return SetHealth(ctx, r.Pool, nodeID, hb.Health, hb.TerminalAddr, hb.TerminalHostKey, now)
}
