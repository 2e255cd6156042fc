package node

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// fillGPUUUID records c's GPU UUID on the node's slot for c's GPU when
// that slot is past pending (approved slots are otherwise never touched
// by discovery) and has none yet: a slot approved before the inventory
// knew UUIDs gets its UUID at the next discovery. A UUID already
// recorded is kept: a GPU swapped under an approved slot then fails the
// driver check rather than silently passing it. It reports whether such
// a slot exists, so discovery adds no second slot for the GPU.
func fillGPUUUID(ctx context.Context, q store.Querier, nodeID string, c api.CandidateSlot) (bool, error) {
	var known bool
	err := q.QueryRow(ctx, `WITH s AS (SELECT id, gpu_uuid FROM slots WHERE node_id=$1 AND gpu_pci=$2 AND state <> 'pending'),
		u AS (UPDATE slots SET gpu_uuid=$3 FROM s WHERE slots.id = s.id AND s.gpu_uuid = '' AND $3 <> '')
		SELECT EXISTS (SELECT 1 FROM s)`, nodeID, c.GPUPCI, c.GPUUUID).Scan(&known)
	if err != nil {
		return false, fmt.Errorf("slot %s gpu uuid: %w", c.GPUPCI, err)
	}
	return known, nil
}

// DriverInventory is what the driver check compares a slice guest's GPUs
// with: the UUIDs of the allocation's slots ("" for one the inventory
// does not know), and whether their node is a test node (one enrolled
// with EnrollTokenRequest.Test, whose slices may report simulated GPUs).
type DriverInventory struct {
	UUIDs    []string
	TestNode bool
}

// InventoryOf reads the DriverInventory of an allocation's slots.
func InventoryOf(ctx context.Context, q store.Querier, allocationID string) (DriverInventory, error) {
	rows, err := q.Query(ctx, `SELECT s.gpu_uuid, n.test_node FROM slots s JOIN nodes n ON n.id = s.node_id
		WHERE s.allocation_id = $1 ORDER BY s.node_id, s.idx`, allocationID)
	if err != nil {
		return DriverInventory{}, fmt.Errorf("driver inventory: %w", err)
	}
	var inv DriverInventory
	var uuid string
	var test bool
	seen := 0
	_, err = pgx.ForEachRow(rows, []any{&uuid, &test}, func() error {
		inv.UUIDs = append(inv.UUIDs, uuid)
		// Every slot's node must be a test node (an allocation's slots
		// are on one node today).
		inv.TestNode = test && (seen == 0 || inv.TestNode)
		seen++
		return nil
	})
	if err != nil {
		return DriverInventory{}, fmt.Errorf("driver inventory: %w", err)
	}
	return inv, nil
}
