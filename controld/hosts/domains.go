package hosts

import (
	"context"
	"crypto/ed25519"
	"time"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Nodes is what hosts needs of controld/node (node.Reports): hosts checks
// enrollments and heartbeats, the node package applies them. An interface
// because hosts imports no domain package (docs/architecture.md).
type Nodes interface {
	// Enroll registers a node with its one-time token, audited and
	// announced; the answer names the node.
	Enroll(ctx context.Context, req hostproto.EnrollRequest, now time.Time) (hostproto.EnrollResponse, error)
	// PublicKey is an enrolled node's key; nil for no such node.
	PublicKey(ctx context.Context, nodeID string) (ed25519.PublicKey, error)
	// Heartbeat records a heartbeat's health and terminal server.
	Heartbeat(ctx context.Context, nodeID string, hb hostproto.Heartbeat, now time.Time) error
}

// FaultApplier applies a checked GPU fault report (faults.Applier), once.
type FaultApplier interface {
	Apply(ctx context.Context, nodeID string, f hostproto.GPUFault, now time.Time) error
}

// ProgressEvents are the events telling an allocation's project members of
// phases its task reported, in order (alloc.ProgressEvents).
type ProgressEvents func(ctx context.Context, q store.Querier, allocationID, taskType string, phases []hostproto.TaskProgress) ([]outbox.Event, error)
