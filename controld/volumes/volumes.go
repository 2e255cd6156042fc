// Package volumes owns projects' persistent volumes (table volumes;
// docs/volumes.md): their rows, the node tasks that make, grow and remove
// them, and the settlers that apply those tasks' outcomes. A volume lives
// on one node; the scheduler places an allocation that mounts it there.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// idPrefix starts every volume id ("vol-7k2m9x4q1c"): safe as a file
// name on the node and as an SSH user name at the gateway.
const idPrefix = "vol"

// NewID returns a new volume id.
func NewID() string { return ids.New(idPrefix) }

// columns are what scan reads.
const columns = `id, project_id, name, node_id, node_name, size_bytes, coalesce(resizing_to, 0), state, reason,
	coalesce(allocation_id, ''), mount_path, coalesce(session_by, ''), session_at, created_by, created_at, updated_at`

func scan(r pgx.CollectableRow) (api.Volume, error) { return scanWith(r) }

// scanWith scans columns and then extra.
func scanWith(r pgx.CollectableRow, extra ...any) (api.Volume, error) {
	var v api.Volume
	var sessionUser string
	var sessionAt *time.Time
	dst := append([]any{&v.ID, &v.ProjectID, &v.Name, &v.NodeID, &v.Node, &v.SizeBytes, &v.ResizingTo, &v.State, &v.Reason,
		&v.AllocationID, &v.MountPath, &sessionUser, &sessionAt, &v.CreatedBy, &v.CreatedAt, &v.UpdatedAt}, extra...)
	err := r.Scan(dst...)
	v.CreatedAt, v.UpdatedAt = v.CreatedAt.UTC(), v.UpdatedAt.UTC()
	if sessionAt != nil {
		v.Session = &api.VolumeSession{UserID: sessionUser, Since: sessionAt.UTC()}
	}
	return v, err
}

// Get returns the volume of project projectID that ref names: its id, or
// the name of one that is not deleted.
func Get(ctx context.Context, q store.Querier, projectID, ref string) (api.Volume, error) {
	return get(ctx, q, projectID, ref, "")
}

// GetForShare is Get with the row share-locked for the transaction: a
// workload that binds the volume (controld/workloads mounts.go) holds it
// against a concurrent detach, which waits, then sees the workload.
func GetForShare(ctx context.Context, tx pgx.Tx, projectID, ref string) (api.Volume, error) {
	return get(ctx, tx, projectID, ref, " FOR SHARE")
}

// getForUpdate is Get with the row locked for the transaction.
func getForUpdate(ctx context.Context, tx pgx.Tx, projectID, ref string) (api.Volume, error) {
	return get(ctx, tx, projectID, ref, " FOR UPDATE")
}

func get(ctx context.Context, q store.Querier, projectID, ref, lock string) (api.Volume, error) {
	rows, err := q.Query(ctx, `SELECT `+columns+` FROM volumes
		WHERE project_id = $1 AND (id = $2 OR (name = $2 AND state <> 'deleted'))`+lock, projectID, ref)
	if err != nil {
		return api.Volume{}, fmt.Errorf("get volume: %w", err)
	}
	v, err := pgx.CollectExactlyOneRow(rows, scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Volume{}, api.Errorf(api.CodeNotFound, "no volume %q in the project", ref).
			WithHint("see `gpuaas volume list`")
	}
	if err != nil {
		return api.Volume{}, fmt.Errorf("get volume: %w", err)
	}
	return v, nil
}

// List returns a project's volumes by name; deleted ones only with all.
func List(ctx context.Context, q store.Querier, projectID string, all bool) ([]api.Volume, error) {
	rows, err := q.Query(ctx, `SELECT `+columns+` FROM volumes
		WHERE project_id = $1 AND ($2 OR state <> 'deleted') ORDER BY name, created_at`, projectID, all)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	return out, nil
}

// OnNode returns the volumes a node holds (not deleted), by name.
func OnNode(ctx context.Context, q store.Querier, nodeID string) ([]api.Volume, error) {
	rows, err := q.Query(ctx, `SELECT `+columns+` FROM volumes
		WHERE node_id = $1 AND state <> 'deleted' ORDER BY name`, nodeID)
	if err != nil {
		return nil, fmt.Errorf("volumes on node: %w", err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("volumes on node: %w", err)
	}
	return out, nil
}

// event is a volume's change, told to its project's members.
func event(ctx context.Context, q store.Querier, v api.Volume) (outbox.Event, error) {
	users, err := project.MemberIDs(ctx, q, v.ProjectID)
	if err != nil {
		return outbox.Event{}, err
	}
	return outbox.Event{Kind: api.EventVolume, Subject: v.ID, ProjectID: v.ProjectID, Users: users, Payload: v}, nil
}

// update sets a volume's columns (set is SQL assignments using $2 on)
// and returns the row as it is after.
func update(ctx context.Context, q store.Querier, id, set string, now time.Time, args ...any) (api.Volume, error) {
	rows, err := q.Query(ctx, `UPDATE volumes SET `+set+`, updated_at = $`+fmt.Sprint(len(args)+2)+`
		WHERE id = $1 RETURNING `+columns, append(append([]any{id}, args...), now)...)
	if err != nil {
		return api.Volume{}, fmt.Errorf("update volume %s: %w", id, err)
	}
	v, err := pgx.CollectExactlyOneRow(rows, scan)
	if err != nil {
		return api.Volume{}, fmt.Errorf("update volume %s: %w", id, err)
	}
	return v, nil
}
