package sessions

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// Volume sessions (docs/volumes.md, "Data without a GPU";
// docs/decisions/0049-volume-sessions-listed-and-priced.md): an sftp
// session to a volume is indexed like any other session, naming the
// volume instead of an allocation, so `gpuaas session list` shows who had
// which volume when. controld/volumes calls these in the transaction that
// holds or lets go of the volume: the row follows the hold exactly. The
// gateway does not count a volume session's bytes, so Bytes stays 0.

// StartVolume indexes a running sftp session of userID to volumeID and
// ends the one the volume had left running (a hold taken over after its
// lease), as interrupted.
func StartVolume(ctx context.Context, q store.Querier, volumeID, userID string, now time.Time) (api.TerminalSession, error) {
	if _, err := EndVolume(ctx, q, volumeID, true, now); err != nil {
		return api.TerminalSession{}, err
	}
	s := api.TerminalSession{ID: ids.New(IDPrefix), UserID: userID, VolumeID: volumeID, Kind: api.SessionSFTP,
		StartedAt: now, State: api.SessionRunning}
	if _, err := q.Exec(ctx, `INSERT INTO terminal_sessions (id, user_id, volume_id, kind, started_at)
		VALUES ($1, $2, $3, $4, $5)`, s.ID, s.UserID, s.VolumeID, s.Kind, s.StartedAt); err != nil {
		return api.TerminalSession{}, fmt.Errorf("start volume session: %w", err)
	}
	return s, nil
}

// EndVolume ends volumeID's running session, if any: SessionEnded when
// its gateway said so, SessionInterrupted when it was ended for it (the
// node reported no such session, the volume was lost, or the hold was
// taken over). It returns the session ended, or nil.
func EndVolume(ctx context.Context, q store.Querier, volumeID string, interrupted bool, now time.Time) (*api.TerminalSession, error) {
	state := api.SessionEnded
	if interrupted {
		state = api.SessionInterrupted
	}
	rows, err := q.Query(ctx, `UPDATE terminal_sessions SET state = $2, ended_at = $3
		WHERE volume_id = $1 AND state = 'running' RETURNING `+returned, volumeID, state, now)
	if err != nil {
		return nil, fmt.Errorf("end volume session: %w", err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("end volume session: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return &out[0], nil
}
