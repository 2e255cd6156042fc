package volumes

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/sessions"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Attaching a volume to a running allocation and detaching it without a
// release (docs/volumes.md, "Attaching to a running allocation";
// docs/decisions/0064-volume-attach-running.md). The volume is held for
// the allocation (attaching, detaching) while its node's task runs; the
// task's settler makes it attached or ready. The tasks carry the
// allocation's id, so they run in order with its other tasks: a release
// asked for after an attach runs after it, and unmounts what it mounted.

// HotAttachArgs is a checked volume.attach: the allocation is locked by
// the caller and belongs to the volume's project.
type HotAttachArgs struct {
	ProjectID string
	Volume    string
	Alloc     api.Allocation
	Path      string
}

// AttachRunning holds volume a.Volume for the running allocation a.Alloc
// (attaching) and asks the node to mount it at the path (volume.attach).
// Refused with the reason, changing nothing: an allocation that is not
// active; a volume on another node; a volume that is not ready (attached
// elsewhere names the allocation or session); a slice on a node whose
// slices take no volumes; a path that is not a mount path or overlaps
// another volume of the allocation.
func AttachRunning(ctx context.Context, tx pgx.Tx, a HotAttachArgs, now time.Time) (api.Volume, []outbox.Event, error) {
	v, err := getForUpdate(ctx, tx, a.ProjectID, strings.TrimSpace(a.Volume))
	if err != nil {
		return api.Volume{}, nil, err
	}
	al := a.Alloc
	if al.State != api.AllocActive {
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "allocation %s is %s: a volume is attached to an active allocation", al.ID, al.State)
	}
	switch {
	case v.State == api.VolumeReady:
	case v.State == api.VolumeAttached && sessionOver(v, now):
		// A session whose gateway never said it ended (volsession.go).
	case v.State == api.VolumeAttached && v.Session != nil:
		return api.Volume{}, nil, sessionConflict(v)
	case v.AllocationID == al.ID:
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "volume %s is %s allocation %s at %s already", v.Name,
			heldWord(v.State), al.ID, v.MountPath)
	case v.AllocationID != "":
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "volume %s is %s allocation %s", v.Name, heldWord(v.State), v.AllocationID).
			WithHint("a volume is in one allocation at a time: `gpuaas volume detach " + v.Name + "` or release " + v.AllocationID + " first")
	default:
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "volume %s is %s: only a ready volume is attached", v.Name, v.State)
	}
	if v.NodeID != al.NodeID {
		return api.Volume{}, nil, api.Errorf(api.CodeInvalidArgument, "volume %s is on node %s and allocation %s is not: a volume is attached on its own node",
			v.Name, v.Node, al.ID)
	}
	if api.VolumeAsDisk(al.Shape) {
		if err := CheckSliceNode(ctx, tx, al.NodeID); err != nil {
			return api.Volume{}, nil, err
		}
	}
	path := strings.TrimSpace(a.Path)
	if path == "" {
		path = api.DefaultMountPath(v.Name)
	}
	if err := api.CheckMountPath(path); err != nil {
		return api.Volume{}, nil, err
	}
	if err := checkFreePath(ctx, tx, al.ID, v.ID, path); err != nil {
		return api.Volume{}, nil, err
	}
	v, err = update(ctx, tx, v.ID, `state = 'attaching', allocation_id = $2, mount_path = $3, reason = '',
		session_key = NULL, session_by = NULL, session_at = NULL`, now, al.ID, path)
	if err != nil {
		return api.Volume{}, nil, fmt.Errorf("attach volume: %w", err)
	}
	if _, err := sessions.EndVolume(ctx, tx, v.ID, true, now); err != nil {
		return api.Volume{}, nil, err
	}
	return enqueueHot(ctx, tx, v, al, api.TaskVolumeAttach, now)
}

// heldWord says how an allocation holds a volume in state.
func heldWord(state string) string {
	switch state {
	case api.VolumeAttaching:
		return "being attached to"
	case api.VolumeDetaching:
		return "being detached from"
	}
	return "attached to"
}

// checkFreePath refuses path when another volume of allocation allocID
// is mounted at it, inside it, or above it.
func checkFreePath(ctx context.Context, tx pgx.Tx, allocID, volumeID, path string) error {
	rows, err := tx.Query(ctx, `SELECT name, mount_path FROM volumes WHERE allocation_id = $1 AND id <> $2`, allocID, volumeID)
	if err != nil {
		return fmt.Errorf("attach volume: %w", err)
	}
	type held struct{ name, path string }
	hs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (held, error) {
		var h held
		return h, r.Scan(&h.name, &h.path)
	})
	if err != nil {
		return fmt.Errorf("attach volume: %w", err)
	}
	for _, h := range hs {
		if nested(h.path, path) {
			return api.Errorf(api.CodeInvalidArgument, "mount path %s overlaps volume %s at %s in allocation %s", path, h.name, h.path, allocID).
				WithHint("choose another --path")
		}
	}
	return nil
}

// DetachRunning asks the node of the active allocation that has volume
// ref to unmount it (volume.detach), the volume detaching meanwhile;
// allocID, when given, must be that allocation. lockAlloc locks an
// allocation of the project (taken before the volume's lock, as a
// release takes them). A volume that is not attached to an allocation,
// or whose allocation is not active (its release detaches it), is
// refused with the reason.
func DetachRunning(ctx context.Context, tx pgx.Tx, projectID, ref, allocID string,
	lockAlloc func(id string) (api.Allocation, error), now time.Time) (api.Volume, []outbox.Event, error) {
	ref = strings.TrimSpace(ref)
	peek, err := Get(ctx, tx, projectID, ref)
	if err != nil {
		return api.Volume{}, nil, err
	}
	var al api.Allocation
	if peek.AllocationID != "" {
		if al, err = lockAlloc(peek.AllocationID); err != nil {
			return api.Volume{}, nil, err
		}
	}
	v, err := getForUpdate(ctx, tx, projectID, ref)
	if err != nil {
		return api.Volume{}, nil, err
	}
	switch {
	case v.State == api.VolumeAttached && v.Session != nil:
		return api.Volume{}, nil, sessionConflict(v)
	case v.AllocationID == "":
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "volume %s is %s: it is attached to no allocation", v.Name, v.State)
	case v.AllocationID != al.ID:
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "volume %s changed meanwhile: try again", v.Name)
	case allocID != "" && allocID != v.AllocationID:
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "volume %s is %s allocation %s, not %s", v.Name, heldWord(v.State), v.AllocationID, allocID)
	case v.State != api.VolumeAttached:
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "volume %s is %s allocation %s: wait until it is done", v.Name, heldWord(v.State), v.AllocationID)
	case al.State != api.AllocActive:
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "allocation %s is %s: its release detaches volume %s", al.ID, al.State, v.Name)
	}
	if v, err = update(ctx, tx, v.ID, `state = 'detaching', reason = ''`, now); err != nil {
		return api.Volume{}, nil, fmt.Errorf("detach volume: %w", err)
	}
	return enqueueHot(ctx, tx, v, al, api.TaskVolumeDetach, now)
}

// enqueueHot asks the allocation's node to run typ on v, in order with
// the allocation's other tasks, and returns v with its event.
func enqueueHot(ctx context.Context, tx pgx.Tx, v api.Volume, al api.Allocation, typ string, now time.Time) (api.Volume, []outbox.Event, error) {
	taskID, err := tasks.Enqueue(ctx, tx, tasks.Task{NodeID: v.NodeID, AllocationID: al.ID, Type: typ,
		Params: api.VolumeHotParams{AllocationID: al.ID, PosixUser: api.PosixUser(al.ID), Shape: al.Shape,
			Volume: api.VolumeAttachment{VolumeID: v.ID, Name: v.Name, Path: v.MountPath}}}, now)
	if err != nil {
		return api.Volume{}, nil, err
	}
	if v, err = update(ctx, tx, v.ID, `task_id = $2`, now, taskID); err != nil {
		return api.Volume{}, nil, err
	}
	ev, err := event(ctx, tx, v)
	if err != nil {
		return api.Volume{}, nil, err
	}
	return v, []outbox.Event{ev}, nil
}

func settleAttach(ctx context.Context, tx pgx.Tx, o tasks.Outcome) (tasks.Effect, error) {
	if o.Result.Status == hostproto.TaskSucceeded {
		return settled(ctx, tx, o, api.VolumeAttaching, `state = 'attached', reason = ''`)
	}
	return settled(ctx, tx, o, api.VolumeAttaching, `state = 'ready', allocation_id = NULL, mount_path = '', reason = $2`,
		"attach: "+o.Reason())
}

func settleDetach(ctx context.Context, tx pgx.Tx, o tasks.Outcome) (tasks.Effect, error) {
	if o.Result.Status == hostproto.TaskSucceeded {
		return settled(ctx, tx, o, api.VolumeDetaching, `state = 'ready', allocation_id = NULL, mount_path = '', reason = ''`)
	}
	return settled(ctx, tx, o, api.VolumeDetaching, `state = 'attached', reason = $2`, "detach: "+o.Reason())
}

// QueueOfAllocation queues into b the read of the volumes allocation
// allocID has, by path, into out (alloc.get: one round trip).
func QueueOfAllocation(b *pgx.Batch, out *[]api.AllocVolume, allocID string) {
	b.Queue(`SELECT id, name, mount_path, state FROM volumes WHERE allocation_id = $1 ORDER BY mount_path`, allocID).
		Query(func(rows pgx.Rows) error {
			vs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.AllocVolume, error) {
				var v api.AllocVolume
				return v, r.Scan(&v.VolumeID, &v.Name, &v.Path, &v.State)
			})
			if err != nil {
				return fmt.Errorf("volumes of %s: %w", allocID, err)
			}
			*out = vs
			return nil
		})
}
