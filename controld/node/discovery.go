package node

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// ApplyDiscovery records what a node's topology discovery proposed. New
// candidate slots are added as pending (an operator approves them);
// pending slots no longer proposed are dropped; approved and reserved
// slots are never touched. A node with no blockers and some slots becomes
// ready; blockers are kept in its health for operators to see. With
// autoApprove (dev only) the pending slots are approved at once.
func ApplyDiscovery(ctx context.Context, q store.Querier, nodeID string, r api.TopologyResult, autoApprove bool, now time.Time) error {
	model := ""
	if len(r.GPUs) > 0 {
		model = r.GPUs[0].Model
	}
	seen := map[string]bool{}
	for _, c := range r.CandidateSlots {
		seen[c.GPUPCI] = true
		tag, err := q.Exec(ctx, `UPDATE slots SET nvme=$3, fabric_vf=$4, numa_node=$5, mac=$6, ip=$7, gpu_uuid=$8
			WHERE node_id=$1 AND gpu_pci=$2 AND state='pending'`, nodeID, c.GPUPCI, c.NVMe, c.FabricVF, c.NUMANode, c.MAC, c.IP, c.GPUUUID)
		if err != nil {
			return fmt.Errorf("update slot %s: %w", c.GPUPCI, err)
		}
		if tag.RowsAffected() > 0 {
			continue
		}
		if known, err := fillGPUUUID(ctx, q, nodeID, c); err != nil || known {
			if err != nil {
				return err
			}
			continue
		}
		if _, err := q.Exec(ctx, `INSERT INTO slots (id, node_id, idx, gpu_pci, nvme, fabric_vf, numa_node, mac, ip, state, gpu_uuid)
			SELECT $1, $2, coalesce(max(idx) + 1, 0), $3, $4, $5, $6, $7, $8, 'pending', $9 FROM slots WHERE node_id = $2
			ON CONFLICT DO NOTHING`, ids.New(ids.Slot), nodeID, c.GPUPCI, c.NVMe, c.FabricVF, c.NUMANode, c.MAC, c.IP, c.GPUUUID); err != nil {
			return fmt.Errorf("add slot %s: %w", c.GPUPCI, err)
		}
	}
	pending := []string{}
	for pci := range seen {
		pending = append(pending, pci)
	}
	if _, err := q.Exec(ctx, `DELETE FROM slots WHERE node_id=$1 AND state='pending' AND NOT (gpu_pci = ANY($2))`, nodeID, pending); err != nil {
		return fmt.Errorf("drop stale slots: %w", err)
	}
	if autoApprove && len(r.Blockers) == 0 {
		if _, err := ApproveSlots(ctx, q, nodeID, nil); err != nil {
			return err
		}
	}
	topo, err := json.Marshal(map[string]any{"kernel": r.Kernel, "memory_mib": r.MemoryMiB, "gpus": len(r.GPUs),
		"numa_nodes": len(r.NUMANodes), "blockers": r.Blockers})
	if err != nil {
		return fmt.Errorf("encode topology: %w", err)
	}
	ready := len(r.Blockers) == 0 && len(r.CandidateSlots) > 0
	if _, err := q.Exec(ctx, `UPDATE nodes SET gpu_model = CASE WHEN $2 = '' THEN gpu_model ELSE $2 END,
		health = health || jsonb_build_object('topology', $3::jsonb),
		state = CASE WHEN state = 'enrolled' AND $4 THEN 'ready' ELSE state END,
		updated_at = $5 WHERE id = $1`, nodeID, model, topo, ready, now); err != nil {
		return fmt.Errorf("update node after discovery: %w", err)
	}
	return nil
}

// SetHealth stores the latest health probe and heartbeat time, and the
// terminal server's address when the node reports one (it may change when
// hostd restarts); a node that was down comes back to what it was before
// (ready, or enrolled when it never finished discovery).
func SetHealth(ctx context.Context, q store.Querier, nodeID string, probe json.RawMessage, terminalAddr, terminalHostKey string, now time.Time) error {
	if _, err := q.Exec(ctx, setHealthSQL, nodeID, now, nullJSON(probe), terminalAddr, terminalHostKey); err != nil {
		return fmt.Errorf("node health: %w", err)
	}
	return nil
}

// QueueSetHealth queues SetHealth's statement in b: a probe's outcome is
// stored in the round trip that commits it (tasks.Effect.Final).
func QueueSetHealth(b *pgx.Batch, nodeID string, probe json.RawMessage, now time.Time) {
	b.Queue(setHealthSQL, nodeID, now, nullJSON(probe), "", "").Fn = func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("node health: %w", err)
		}
		return nil
	}
}

const setHealthSQL = `UPDATE nodes SET last_heartbeat_at = $2,
	health = CASE WHEN $3::jsonb IS NULL THEN health ELSE health || jsonb_build_object('probe', $3::jsonb) END,
	terminal_addr = CASE WHEN $4::text = '' THEN terminal_addr ELSE $4::text END,
	terminal_host_key = CASE WHEN $5::text = '' THEN terminal_host_key ELSE $5::text END,
	state = CASE WHEN state <> 'down' THEN state
		WHEN EXISTS (SELECT 1 FROM slots s WHERE s.node_id = nodes.id AND s.state <> 'pending') THEN 'ready'
		ELSE 'enrolled' END
	WHERE id = $1`

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

// MarkDown sets nodes silent since before cutoff to down and returns their
// ids.
func MarkDown(ctx context.Context, q store.Querier, cutoff, now time.Time) ([]string, error) {
	rows, err := q.Query(ctx, `UPDATE nodes SET state = 'down', updated_at = $2
		WHERE state IN ('ready', 'enrolled') AND last_heartbeat_at IS NOT NULL AND last_heartbeat_at < $1
		AND public_key IS NOT NULL RETURNING id`, cutoff, now)
	if err != nil {
		return nil, fmt.Errorf("mark nodes down: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
