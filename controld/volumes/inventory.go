package volumes

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/sessions"
)

// InventoryGrace is how long a volume must have been unchanged before a
// node's report that lacks it fails it: a node probes its volumes every
// 30 s (hostd's health probe), so a report can predate a volume made or
// attached moments ago; it cannot predate one this old.
const InventoryGrace = 2 * time.Minute

// healthInventory is the part of a node's health probe that lists the
// volumes it holds (hostd/tasks.HealthReport.Volumes): absent when the
// node keeps no volumes or could not list them, which proves nothing.
type healthInventory struct {
	Volumes *[]string `json:"volumes"`
}

// CheckInventory compares a node's health report with the volumes it
// should hold (docs/volumes.md, "A node that comes back without a
// volume"): each ready or attached volume of the node, unchanged for
// InventoryGrace, that the report does not list is lost — failed with the
// reason, detached from its allocation, no longer charged (its meter stops
// at now) — and its project's members are told by its event. Nothing is
// deleted: an operator who restores the image can see the id in the
// reason. A report without a list changes nothing.
func CheckInventory(ctx context.Context, tx pgx.Tx, nodeID string, health json.RawMessage, now time.Time) ([]outbox.Event, error) {
	var inv healthInventory
	if len(health) == 0 || json.Unmarshal(health, &inv) != nil || inv.Volumes == nil {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `SELECT id FROM volumes WHERE node_id = $1 AND state IN ('ready', 'attached')
		AND updated_at < $2 AND NOT (id = ANY($3)) ORDER BY id FOR UPDATE`, nodeID, now.Add(-InventoryGrace), *inv.Volumes)
	if err != nil {
		return nil, fmt.Errorf("check volumes of node %s: %w", nodeID, err)
	}
	lost, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("check volumes of node %s: %w", nodeID, err)
	}
	var evs []outbox.Event
	for _, id := range lost {
		v, err := update(ctx, tx, id, `state = 'failed', allocation_id = NULL, mount_path = '', resizing_to = NULL,
			session_key = NULL, session_by = NULL, session_at = NULL,
			reason = 'lost: its node reported it missing at ' || to_char($2::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
				|| ' (the image is gone from the node''s data disk); it is no longer charged'`, now, now)
		if err != nil {
			return nil, err
		}
		if err := stopMeter(ctx, tx, id, now); err != nil {
			return nil, err
		}
		if _, err := sessions.EndVolume(ctx, tx, id, true, now); err != nil {
			return nil, err
		}
		ev, err := event(ctx, tx, v)
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}
