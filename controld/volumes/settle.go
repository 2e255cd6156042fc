package volumes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Settlers apply the outcomes of the volume tasks: a made volume is
// ready, one the node could not make is failed with the reason; a grown
// one has its new size (a failed resize keeps the old, with the reason);
// a removed one is deleted, one the node could not remove is failed; a
// volume plugged into or taken out of a running allocation is attached
// or ready, or back as it was with the reason (hot.go).
func Settlers() tasks.Settlers {
	return tasks.Settlers{
		api.TaskVolumeCreate: settleCreate,
		api.TaskVolumeResize: settleResize,
		api.TaskVolumeDelete: settleDelete,
		api.TaskVolumeAttach: settleAttach, // hot.go
		api.TaskVolumeDetach: settleDetach,
	}
}

// settled applies set to the volume whose current task o settles, when
// it is in state want (any, for ""), and returns its event; a result of
// an older task of the volume changes nothing.
func settled(ctx context.Context, tx pgx.Tx, o tasks.Outcome, want, set string, args ...any) (tasks.Effect, error) {
	return settledThen(ctx, tx, o, want, nil, set, args...)
}

// settledThen is settled that also runs then on the volume as it is
// after (billing: its meter starts, or a resized one is charged at the
// new size), in tx.
func settledThen(ctx context.Context, tx pgx.Tx, o tasks.Outcome, want string, then func(api.Volume) error,
	set string, args ...any) (tasks.Effect, error) {
	var id, state string
	err := tx.QueryRow(ctx, `SELECT id, state FROM volumes WHERE task_id = $1 AND node_id = $2 FOR UPDATE`,
		o.TaskID, o.NodeID).Scan(&id, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		return tasks.Effect{}, nil
	}
	if err != nil {
		return tasks.Effect{}, fmt.Errorf("settle %s: %w", o.Type, err)
	}
	if want != "" && state != want {
		return tasks.Effect{}, nil
	}
	v, err := update(ctx, tx, id, set, o.Now, args...)
	if err != nil {
		return tasks.Effect{}, err
	}
	if then != nil {
		if err := then(v); err != nil {
			return tasks.Effect{}, err
		}
	}
	ev, err := event(ctx, tx, v)
	if err != nil {
		return tasks.Effect{}, err
	}
	return tasks.Effect{Events: []outbox.Event{ev}}, nil
}

func settleCreate(ctx context.Context, tx pgx.Tx, o tasks.Outcome) (tasks.Effect, error) {
	if o.Result.Status == hostproto.TaskSucceeded {
		return settledThen(ctx, tx, o, api.VolumeCreating, func(v api.Volume) error {
			return startMeter(ctx, tx, v, o.Now)
		}, `state = 'ready', reason = ''`)
	}
	return settled(ctx, tx, o, api.VolumeCreating, `state = 'failed', reason = $2`, "create: "+o.Reason())
}

func settleResize(ctx context.Context, tx pgx.Tx, o tasks.Outcome) (tasks.Effect, error) {
	if o.Result.Status == hostproto.TaskSucceeded {
		var r hostproto.VolumeTaskResult
		if err := json.Unmarshal(o.Result.Result, &r); err != nil || r.SizeBytes <= 0 {
			return tasks.Effect{}, fmt.Errorf("settle %s: malformed result %s", o.Type, o.Result.Result)
		}
		return settledThen(ctx, tx, o, "", func(v api.Volume) error {
			return resizeMeter(ctx, tx, v, o.Now)
		}, `size_bytes = greatest(size_bytes, $2), resizing_to = NULL, reason = ''`, r.SizeBytes)
	}
	return settled(ctx, tx, o, "", `resizing_to = NULL, reason = $2`, "resize: "+o.Reason())
}

func settleDelete(ctx context.Context, tx pgx.Tx, o tasks.Outcome) (tasks.Effect, error) {
	if o.Result.Status == hostproto.TaskSucceeded {
		return settled(ctx, tx, o, api.VolumeDeleting, `state = 'deleted', deleted_at = $2`, o.Now)
	}
	return settled(ctx, tx, o, api.VolumeDeleting, `state = 'failed', reason = $2`, "delete: "+o.Reason())
}
