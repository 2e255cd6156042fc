package volumes

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// enqueue asks the volume's node to run task typ on it and records the
// task as the volume's current one (its settler finds the volume by it).
func enqueue(ctx context.Context, tx pgx.Tx, id, typ string, size int64, now time.Time) (api.Volume, error) {
	var nodeID string
	if err := tx.QueryRow(ctx, `SELECT node_id FROM volumes WHERE id = $1`, id).Scan(&nodeID); err != nil {
		return api.Volume{}, fmt.Errorf("%s: %w", typ, err)
	}
	taskID, err := tasks.Enqueue(ctx, tx, tasks.Task{NodeID: nodeID, Type: typ,
		Params: hostproto.VolumeTaskParams{VolumeID: id, SizeBytes: size}}, now)
	if err != nil {
		return api.Volume{}, err
	}
	return update(ctx, tx, id, `task_id = $2`, now, taskID)
}

// Resize asks the volume's node to grow it to size (volume.resize): only
// a ready or attached volume, one resize at a time, never smaller, and
// within the node's room. The size changes when the node has done it.
func Resize(ctx context.Context, tx pgx.Tx, projectID, ref string, size int64, now time.Time) (api.Volume, []outbox.Event, error) {
	v, err := getForUpdate(ctx, tx, projectID, ref)
	if err != nil {
		return api.Volume{}, nil, err
	}
	switch {
	case v.State != api.VolumeReady && v.State != api.VolumeAttached:
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "volume %s is %s: only a ready or attached volume grows", v.Name, v.State)
	case v.ResizingTo != 0:
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "volume %s is being resized to %s already", v.Name,
			api.FormatVolumeSize(v.ResizingTo))
	case size < v.SizeBytes:
		return api.Volume{}, nil, api.Errorf(api.CodeInvalidArgument, "volume %s is %s: volumes only grow", v.Name,
			api.FormatVolumeSize(v.SizeBytes))
	case size == v.SizeBytes:
		return api.Volume{}, nil, api.Errorf(api.CodeInvalidArgument, "volume %s is %s already", v.Name, api.FormatVolumeSize(size))
	}
	d, err := node.Get(ctx, tx, v.NodeID)
	if err != nil {
		return api.Volume{}, nil, err
	}
	free, known, err := room(ctx, tx, d.Node)
	if err != nil {
		return api.Volume{}, nil, err
	}
	if more := size - v.SizeBytes; known && more > free {
		return api.Volume{}, nil, overRoom(more, d.Node.Name, free)
	}
	if _, err = update(ctx, tx, v.ID, `resizing_to = $2, reason = ''`, now, size); err != nil {
		return api.Volume{}, nil, err
	}
	if v, err = enqueue(ctx, tx, v.ID, api.TaskVolumeResize, size, now); err != nil {
		return api.Volume{}, nil, err
	}
	ev, err := event(ctx, tx, v)
	return v, []outbox.Event{ev}, err
}

// Remove asks the volume's node to delete it and its data
// (volume.delete): refused while attached (release the allocation
// first), being made, grown or deleted. A failed volume may be removed.
func Remove(ctx context.Context, tx pgx.Tx, projectID, ref string, now time.Time) (api.Volume, []outbox.Event, error) {
	v, err := getForUpdate(ctx, tx, projectID, ref)
	if err != nil {
		return api.Volume{}, nil, err
	}
	switch {
	case v.State == api.VolumeAttached && v.Session != nil:
		return api.Volume{}, nil, sessionConflict(v)
	case v.State == api.VolumeAttached:
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "volume %s is attached to allocation %s", v.Name, v.AllocationID).
			WithHint("release the allocation first (`gpuaas alloc release " + v.AllocationID + "`): the volume stays")
	case v.State == api.VolumeDeleted:
		return api.Volume{}, nil, api.Errorf(api.CodeNotFound, "volume %s is deleted", v.ID)
	case v.State != api.VolumeReady && v.State != api.VolumeFailed:
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "volume %s is %s: try again when it is ready", v.Name, v.State)
	case v.ResizingTo != 0:
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "volume %s is being resized: try again when that is done", v.Name)
	}
	if _, err = update(ctx, tx, v.ID, `state = 'deleting', reason = ''`, now); err != nil {
		return api.Volume{}, nil, err
	}
	// Charging stops at the removal request, as an allocation's at its
	// release request: what the node does after is not the user's.
	if err := stopMeter(ctx, tx, v.ID, now); err != nil {
		return api.Volume{}, nil, err
	}
	if v, err = enqueue(ctx, tx, v.ID, api.TaskVolumeDelete, 0, now); err != nil {
		return api.Volume{}, nil, err
	}
	ev, err := event(ctx, tx, v)
	return v, []outbox.Event{ev}, err
}
