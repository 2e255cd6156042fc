package volumes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/sessions"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Volume sessions (docs/volumes.md, "Data without a GPU";
// docs/decisions/0037-volume-sessions.md): `sftp <volume-id>@gateway`
// attaches a volume to an sftp session instead of an allocation, with the
// same exclusion — one holder at a time, allocation or session, decided
// under the volume's row lock, so a create racing a session (or two
// sessions) cannot both win. The session is named by the fingerprint of
// the gateway's ticket key: a retried gate.authorize is the same session.

// SessionMargin is added to api.VolumeSessionMax before a hold whose
// gateway never ended it counts as over: the node ends every session by
// then, and the margin covers clocks and a session's last unmount.
const SessionMargin = 15 * time.Minute

// sessionOver reports whether v's session hold is past its lease.
func sessionOver(v api.Volume, now time.Time) bool {
	return v.Session != nil && now.Sub(v.Session.Since) > api.VolumeSessionMax+SessionMargin
}

// sessionConflict is the refusal of a volume an sftp session has.
func sessionConflict(v api.Volume) *api.Error {
	return api.Errorf(api.CodeConflict, "volume %s is open in an sftp session of %s since %s", v.Name, v.Session.UserID,
		v.Session.Since.Format(time.RFC3339)).
		WithHint("a volume is in one place at a time: the session ends when its sftp client exits")
}

// OpenSession holds volume id for a session of userID named by key (the
// ticket key's fingerprint) and returns it with its event. Who may: an
// owner or member of the volume's project; anyone else is told there is
// no such volume, as for an id that does not exist. What: a ready volume
// (or one this very session holds: a retry); attached to an allocation,
// to another live session, being made, removed or failed is refused with
// the reason. A depleted project may still open its volumes: reading
// one's data out costs nothing beyond the GB-hours already charged.
func OpenSession(ctx context.Context, tx pgx.Tx, id, userID, key string, now time.Time) (api.Volume, []outbox.Event, error) {
	rows, err := tx.Query(ctx, `SELECT `+columns+`, coalesce(session_key, '') FROM volumes
		WHERE id = $1 AND state <> 'deleted' FOR UPDATE`, id)
	if err != nil {
		return api.Volume{}, nil, fmt.Errorf("open volume session: %w", err)
	}
	var held string
	v, err := pgx.CollectExactlyOneRow(rows, func(r pgx.CollectableRow) (api.Volume, error) {
		return scanWith(r, &held)
	})
	noSuch := api.Errorf(api.CodeNotFound, "no volume %s", id).WithHint("see `gpuaas volume list`")
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Volume{}, nil, noSuch
	}
	if err != nil {
		return api.Volume{}, nil, fmt.Errorf("open volume session: %w", err)
	}
	role, err := project.RoleOf(ctx, tx, v.ProjectID, userID)
	if err != nil || role == "" {
		return api.Volume{}, nil, noSuch
	}
	if role != api.ProjectOwner && role != api.ProjectMember {
		return api.Volume{}, nil, api.Errorf(api.CodeForbidden, "you are a %s of volume %s's project; sftp needs owner or member", role, v.Name).
			WithHint("ask a project owner: `gpuaas project add-member --role member`")
	}
	switch {
	case v.State == api.VolumeReady:
	case v.State == api.VolumeAttached && held == key:
		return v, nil, nil // the same session asking again
	case v.State == api.VolumeAttached && sessionOver(v, now):
	case v.State == api.VolumeAttached && v.Session != nil:
		return api.Volume{}, nil, sessionConflict(v)
	case v.State == api.VolumeAttached:
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "volume %s is attached to allocation %s (at %s)", v.Name, v.AllocationID, v.MountPath).
			WithHint("reach it there: `ssh " + v.AllocationID + "@gateway`, `sftp " + v.AllocationID + "@gateway`")
	case v.State == api.VolumeFailed:
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "volume %s failed: %s", v.Name, v.Reason)
	default:
		return api.Volume{}, nil, api.Errorf(api.CodeConflict, "volume %s is %s: only a ready volume is opened", v.Name, v.State)
	}
	v, err = update(ctx, tx, v.ID, `state = 'attached', session_key = $2, session_by = $3, session_at = $4`, now, key, userID, now)
	if err != nil {
		return api.Volume{}, nil, fmt.Errorf("open volume session: %w", err)
	}
	// Listed by `gpuaas session list`; a hold taken over ends its row.
	if _, err := sessions.StartVolume(ctx, tx, v.ID, userID, now); err != nil {
		return api.Volume{}, nil, err
	}
	ev, err := event(ctx, tx, v)
	if err != nil {
		return api.Volume{}, nil, err
	}
	return v, []outbox.Event{ev}, nil
}

// EndSession lets go of volume id if the session named by key still
// holds it (ready again, with its event); otherwise it changes nothing
// and says so (an end told twice, or after the hold was taken over).
func EndSession(ctx context.Context, tx pgx.Tx, id, key string, now time.Time) (api.Volume, []outbox.Event, bool, error) {
	return endSession(ctx, tx, id, key, false, now)
}

// endSession is EndSession; interrupted marks the session's row
// interrupted (ended for it) rather than ended (its gateway said so).
func endSession(ctx context.Context, tx pgx.Tx, id, key string, interrupted bool, now time.Time) (api.Volume, []outbox.Event, bool, error) {
	rows, err := tx.Query(ctx, `UPDATE volumes SET state = 'ready', session_key = NULL, session_by = NULL, session_at = NULL,
		updated_at = $3 WHERE id = $1 AND session_key = $2 RETURNING `+columns, id, key, now)
	if err != nil {
		return api.Volume{}, nil, false, fmt.Errorf("end volume session: %w", err)
	}
	v, err := pgx.CollectExactlyOneRow(rows, scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Volume{}, nil, false, nil
	}
	if err != nil {
		return api.Volume{}, nil, false, fmt.Errorf("end volume session: %w", err)
	}
	if _, err := sessions.EndVolume(ctx, tx, v.ID, interrupted, now); err != nil {
		return api.Volume{}, nil, false, err
	}
	ev, err := event(ctx, tx, v)
	if err != nil {
		return api.Volume{}, nil, false, err
	}
	return v, []outbox.Event{ev}, true, nil
}
