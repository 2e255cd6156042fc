// Package node owns nodes, their slots and enrollment tokens: registration
// and enrollment, heartbeats and health, topology discovery, approval and
// draining, and the slot side of placement (candidates with room,
// reserving and freeing slots). Where a request goes is decided by
// controld/sched over what this package offers.
package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// SlotSpec describes one discovered GPU slot.
type SlotSpec = api.SlotSpec

// Spec describes a node to register. It is declared in internal/api so
// that hostd's sim profiles produce it without importing controld.
type Spec = api.NodeSpec

// Register inserts a ready node with its slots pending approval.
func Register(ctx context.Context, q store.Querier, s Spec, now time.Time) (api.Node, error) {
	if !api.KnownShape(s.Shape) {
		return api.Node{}, api.Errorf(api.CodeInvalidArgument, "unknown shape %q", s.Shape)
	}
	n := api.Node{ID: ids.New(ids.Node), Name: s.Name, Shape: s.Shape, GPUModel: s.GPUModel, State: api.NodeReady, CreatedAt: now.UTC()}
	_, err := q.Exec(ctx, `INSERT INTO nodes (id, name, shape, gpu_model, state, created_at, updated_at)
		VALUES ($1,$2,$3,$4,'ready',$5,$5)`, n.ID, n.Name, n.Shape, n.GPUModel, n.CreatedAt)
	if store.IsUniqueViolation(err, "nodes_name_key") {
		return api.Node{}, api.Errorf(api.CodeConflict, "node %q already exists", s.Name)
	}
	if err != nil {
		return api.Node{}, fmt.Errorf("register node: %w", err)
	}
	for i, sl := range s.Slots {
		if _, err := q.Exec(ctx, `INSERT INTO slots (id, node_id, idx, gpu_pci, nvme, fabric_vf, numa_node, mac, ip, state)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,'pending')`, ids.New(ids.Slot), n.ID, i, sl.GPUPCI, sl.NVMe, sl.FabricVF, sl.NUMANode, sl.MAC, sl.IP); err != nil {
			return api.Node{}, fmt.Errorf("register slot %d: %w", i, err)
		}
	}
	n.SlotsTotal = len(s.Slots)
	return n, nil
}

const nodeColumns = `SELECT n.id, n.name, n.shape, n.gpu_model, n.state, n.created_at, n.last_heartbeat_at, n.health,
	(SELECT count(*) FROM slots s WHERE s.node_id = n.id AND s.state IN ('free', 'reserved')),
	(SELECT count(*) FROM slots s WHERE s.node_id = n.id AND s.state = 'free' AND s.quarantined_at IS NULL),
	(SELECT count(*) FROM slots s WHERE s.node_id = n.id AND s.state = 'pending'),
	(SELECT count(*) FROM slots s WHERE s.node_id = n.id AND s.quarantined_at IS NOT NULL)
	FROM nodes n`

func scanNode(r pgx.CollectableRow) (api.Node, error) {
	var n api.Node
	var health []byte
	err := r.Scan(&n.ID, &n.Name, &n.Shape, &n.GPUModel, &n.State, &n.CreatedAt, &n.LastHeartbeat, &health,
		&n.SlotsTotal, &n.SlotsFree, &n.SlotsPending, &n.SlotsQuarantined)
	if len(health) > 2 { // not "{}"
		n.Health = health
	}
	return n, err
}

// List returns every node.
func List(ctx context.Context, q store.Querier) ([]api.Node, error) {
	rows, err := q.Query(ctx, nodeColumns+` ORDER BY n.name`)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanNode)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	if err := countTasks(ctx, q, out); err != nil {
		return nil, err
	}
	return out, nil
}

// countTasks fills in the nodes' open tasks, which controld/tasks counts.
func countTasks(ctx context.Context, q store.Querier, nodes []api.Node) error {
	if len(nodes) == 0 {
		return nil
	}
	nodeIDs := make([]string, len(nodes))
	for i, n := range nodes {
		nodeIDs[i] = n.ID
	}
	open, err := tasks.OpenByNode(ctx, q, nodeIDs)
	if err != nil {
		return err
	}
	for i := range nodes {
		nodes[i].TasksOpen = open[nodes[i].ID]
	}
	return nil
}

// Get returns a node (by id or name) with its slots.
func Get(ctx context.Context, q store.Querier, ref string) (api.NodeDetail, error) {
	rows, err := q.Query(ctx, nodeColumns+` WHERE n.id=$1 OR n.name=$1`, ref)
	if err != nil {
		return api.NodeDetail{}, fmt.Errorf("get node: %w", err)
	}
	n, err := pgx.CollectExactlyOneRow(rows, scanNode)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.NodeDetail{}, api.Errorf(api.CodeNotFound, "node %q not found", ref).WithHint("see `gpuaas node list`")
	}
	if err != nil {
		return api.NodeDetail{}, fmt.Errorf("get node: %w", err)
	}
	one := []api.Node{n}
	if err := countTasks(ctx, q, one); err != nil {
		return api.NodeDetail{}, err
	}
	n = one[0]
	slots, err := Slots(ctx, q, `node_id=$1`, n.ID)
	if err != nil {
		return api.NodeDetail{}, err
	}
	return api.NodeDetail{Node: n, Slots: slots}, nil
}

// slotColumns are the columns scanSlot reads.
const slotColumns = `id, node_id, idx, gpu_pci, nvme, fabric_vf, numa_node, mac, ip, state, coalesce(allocation_id, ''),
	quarantined_at, quarantine_reason, quarantined_by, gpu_uuid`

func scanSlot(r pgx.CollectableRow) (api.Slot, error) {
	var s api.Slot
	var qAt *time.Time
	var qReason, qBy string
	err := r.Scan(&s.ID, &s.NodeID, &s.Index, &s.GPUPCI, &s.NVMe, &s.FabricVF, &s.NUMANode, &s.MAC, &s.IP, &s.State, &s.AllocationID,
		&qAt, &qReason, &qBy, &s.GPUUUID)
	if qAt != nil {
		s.Quarantine = &api.SlotQuarantine{At: qAt.UTC(), Reason: qReason, By: qBy}
	}
	return s, err
}

// Slots returns the slots matching a WHERE clause, by node and index.
func Slots(ctx context.Context, q store.Querier, where string, args ...any) ([]api.Slot, error) {
	rows, err := q.Query(ctx, slotsSQL+where+` ORDER BY node_id, idx`, args...)
	if err != nil {
		return nil, fmt.Errorf("list slots: %w", err)
	}
	return collectSlots(rows)
}

// QueueSlots queues Slots' query in b (a read of several owners' tables
// in one round trip); dst is set when the batch's results are read.
func QueueSlots(b *pgx.Batch, dst *[]api.Slot, where string, args ...any) {
	b.Queue(slotsSQL+where+` ORDER BY node_id, idx`, args...).Query(func(rows pgx.Rows) error {
		out, err := collectSlots(rows)
		*dst = out
		return err
	})
}

const slotsSQL = `SELECT ` + slotColumns + ` FROM slots WHERE `

func collectSlots(rows pgx.Rows) ([]api.Slot, error) {
	out, err := pgx.CollectRows(rows, scanSlot)
	if err != nil {
		return nil, fmt.Errorf("list slots: %w", err)
	}
	return out, nil
}

// ApproveSlots turns pending slots into free ones. With no ids every
// pending slot of the node is approved; naming a slot that is not pending
// on this node is an error and approves nothing.
func ApproveSlots(ctx context.Context, q store.Querier, nodeID string, slotIDs []string) (int, error) {
	if len(slotIDs) == 0 {
		tag, err := q.Exec(ctx, `UPDATE slots SET state='free' WHERE node_id=$1 AND state='pending'`, nodeID)
		if err != nil {
			return 0, fmt.Errorf("approve slots: %w", err)
		}
		return int(tag.RowsAffected()), nil
	}
	tag, err := q.Exec(ctx, `UPDATE slots SET state='free' WHERE node_id=$1 AND state='pending' AND id = ANY($2)`, nodeID, slotIDs)
	if err != nil {
		return 0, fmt.Errorf("approve slots: %w", err)
	}
	if int(tag.RowsAffected()) != len(slotIDs) {
		return 0, api.Errorf(api.CodeInvalidArgument, "%d of the %d slots named are not pending slots of this node",
			len(slotIDs)-int(tag.RowsAffected()), len(slotIDs)).WithHint("see `gpuaas node get NODE`")
	}
	return len(slotIDs), nil
}

// Drain stops new placements on a node; allocations on it keep running.
func Drain(ctx context.Context, q store.Querier, nodeID string, now time.Time) error {
	var state string
	err := q.QueryRow(ctx, `SELECT state FROM nodes WHERE id=$1 FOR UPDATE`, nodeID).Scan(&state)
	if err != nil {
		return fmt.Errorf("drain node: %w", err)
	}
	if state == api.NodeDraining {
		return api.Errorf(api.CodeConflict, "node is already draining")
	}
	if _, err := q.Exec(ctx, `UPDATE nodes SET state='draining', updated_at=$2 WHERE id=$1`, nodeID, now); err != nil {
		return fmt.Errorf("drain node: %w", err)
	}
	return nil
}
