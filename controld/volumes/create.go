package volumes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// CreateArgs is a checked volume.create.
type CreateArgs struct {
	ProjectID string
	Name      string
	SizeBytes int64
	// Node names the node (id or name); empty picks the node with the
	// most room.
	Node    string
	ActorID string
}

// Create records a volume in state creating and asks its node to make
// it (volume.create); settleCreate makes it ready or failed. A name in
// use in the project is a conflict; a size over the node's room for
// volumes is no_capacity, with the room there is.
func Create(ctx context.Context, tx pgx.Tx, a CreateArgs, now time.Time) (api.Volume, []outbox.Event, error) {
	n, err := checkCreate(ctx, tx, a)
	if err != nil {
		return api.Volume{}, nil, err
	}
	id := NewID()
	_, err = tx.Exec(ctx, `INSERT INTO volumes (id, project_id, name, node_id, node_name, size_bytes, state, created_by, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, 'creating', $7, $8, $8)`, id, a.ProjectID, a.Name, n.ID, n.Name, a.SizeBytes, a.ActorID, now)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // a concurrent create of the name
		return api.Volume{}, nil, nameTaken(a.Name)
	}
	if err != nil {
		return api.Volume{}, nil, fmt.Errorf("create volume: %w", err)
	}
	v, err := enqueue(ctx, tx, id, api.TaskVolumeCreate, a.SizeBytes, now)
	if err != nil {
		return api.Volume{}, nil, err
	}
	ev, err := event(ctx, tx, v)
	return v, []outbox.Event{ev}, err
}

// checkCreate checks a create (name, size, name free, node and its
// room) and returns the node the volume would live on.
func checkCreate(ctx context.Context, q store.Querier, a CreateArgs) (api.Node, error) {
	if err := api.CheckVolumeName(a.Name); err != nil {
		return api.Node{}, err
	}
	if a.SizeBytes < api.VolumeMinBytes || a.SizeBytes > api.VolumeMaxBytes || a.SizeBytes%(1<<20) != 0 {
		return api.Node{}, api.Errorf(api.CodeInvalidArgument, "size %d bytes: want a whole number of MiB from %s to %s",
			a.SizeBytes, api.FormatVolumeSize(api.VolumeMinBytes), api.FormatVolumeSize(api.VolumeMaxBytes))
	}
	var taken bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM volumes WHERE project_id = $1 AND name = $2 AND state <> 'deleted')`,
		a.ProjectID, a.Name).Scan(&taken); err != nil {
		return api.Node{}, fmt.Errorf("create volume: %w", err)
	}
	if taken {
		return api.Node{}, nameTaken(a.Name)
	}
	return pickNode(ctx, q, a.Node, a.SizeBytes)
}

func nameTaken(name string) error {
	return api.Errorf(api.CodeConflict, "the project has a volume named %s already", name).
		WithHint("choose another name, or see `gpuaas volume list`")
}

// healthRoom is the part of a node's health (its latest health probe,
// hostd/tasks.HealthReport) that says how much room it has for volumes.
type healthRoom struct {
	Probe struct {
		VolumeFreeBytes *int64 `json:"volume_free_bytes"`
	} `json:"probe"`
}

// room is how many bytes node n can still give volumes: what it last
// reported free, less what volumes being made or grown there will take.
// known is false for a node that has not reported (it then decides when
// the task runs, and a refusal fails the volume with its reason).
func room(ctx context.Context, q store.Querier, n api.Node) (free int64, known bool, err error) {
	var h healthRoom
	if len(n.Health) == 0 || json.Unmarshal(n.Health, &h) != nil || h.Probe.VolumeFreeBytes == nil {
		return 0, false, nil
	}
	var pending int64
	if err := q.QueryRow(ctx, `SELECT coalesce(sum(CASE WHEN state = 'creating' THEN size_bytes ELSE 0 END
		+ coalesce(resizing_to - size_bytes, 0)), 0)::bigint FROM volumes WHERE node_id = $1 AND state <> 'deleted'`,
		n.ID).Scan(&pending); err != nil {
		return 0, false, fmt.Errorf("room for volumes on %s: %w", n.Name, err)
	}
	return max(*h.Probe.VolumeFreeBytes-pending, 0), true, nil
}

// pickNode is the node named by ref, refused when it has not the room
// it reported; or, for no ref, the ready node with the most room.
func pickNode(ctx context.Context, q store.Querier, ref string, size int64) (api.Node, error) {
	if ref != "" {
		d, err := node.Get(ctx, q, ref)
		if err != nil {
			return api.Node{}, err
		}
		if d.Node.State == api.NodeDraining || d.Node.State == api.NodeDown {
			return api.Node{}, api.Errorf(api.CodeNoCapacity, "node %s is %s: no new volumes there", d.Node.Name, d.Node.State)
		}
		free, known, err := room(ctx, q, d.Node)
		if err != nil {
			return api.Node{}, err
		}
		if known && size > free {
			return api.Node{}, overRoom(size, d.Node.Name, free)
		}
		return d.Node, nil
	}
	nodes, err := node.List(ctx, q)
	if err != nil {
		return api.Node{}, err
	}
	var best api.Node
	var bestFree int64 = -1
	for _, n := range nodes {
		if n.State != api.NodeReady {
			continue
		}
		free, known, err := room(ctx, q, n)
		if err != nil {
			return api.Node{}, err
		}
		if known && free > bestFree {
			best, bestFree = n, free
		}
	}
	switch {
	case bestFree < 0:
		return api.Node{}, api.Errorf(api.CodeNoCapacity, "no ready node has reported room for volumes").
			WithHint("name a node with --node")
	case size > bestFree:
		return api.Node{}, overRoom(size, best.Name, bestFree)
	}
	return best, nil
}

func overRoom(size int64, nodeName string, free int64) error {
	return api.Errorf(api.CodeNoCapacity, "size %s is over the room node %s has for volumes (%s free)",
		api.FormatVolumeSize(size), nodeName, formatBytes(free))
}

// formatBytes writes a byte count in the largest binary unit it reaches,
// rounded down to a whole number of MiB.
func formatBytes(b int64) string {
	return api.FormatVolumeSize(b &^ (1<<20 - 1))
}
