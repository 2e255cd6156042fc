// Package sessions owns terminal_sessions: the index of SSH sessions the
// gateway served (who, which allocation, what, how long, how it ended, and
// where its asciicast recording is). The gateway writes it; users read
// their own rows, operators everyone's.
package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// IDPrefix starts every terminal session id ("ts-...").
const IDPrefix = "ts"

// Limits on what the gateway may store.
const (
	MaxCommand   = 4096
	MaxRecording = 255
	MaxGateway   = 255
	// ListLimit bounds one list.
	ListLimit = 1000
)

// returned lists the columns scan reads.
const returned = `id, user_id, coalesce(allocation_id, ''), coalesce(volume_id, ''), kind, command, started_at, ended_at, bytes,
	exit_status, state, recording, gateway`

const columns = `SELECT ` + returned + ` FROM terminal_sessions`

func scan(r pgx.CollectableRow) (api.TerminalSession, error) {
	var s api.TerminalSession
	err := r.Scan(&s.ID, &s.UserID, &s.AllocationID, &s.VolumeID, &s.Kind, &s.Command, &s.StartedAt, &s.EndedAt, &s.Bytes,
		&s.ExitStatus, &s.State, &s.Recording, &s.Gateway)
	return s, err
}

func validKind(k string) bool {
	switch k {
	case api.SessionShell, api.SessionExec, api.SessionSFTP, api.SessionForward:
		return true
	}
	return false
}

func checkText(field, v string, max int) error {
	if len(v) > max || !utf8.ValidString(v) {
		return api.Errorf(api.CodeInvalidArgument, "%s must be valid UTF-8 of at most %d bytes", field, max)
	}
	return nil
}

// Start indexes a new session; req.Gateway names the instance serving it.
func Start(ctx context.Context, q store.Querier, req gateproto.SessionStartRequest, now time.Time) (api.TerminalSession, error) {
	if req.UserID == "" || req.AllocationID == "" {
		return api.TerminalSession{}, api.Errorf(api.CodeInvalidArgument, "user_id and allocation_id are required")
	}
	if !validKind(req.Kind) {
		return api.TerminalSession{}, api.Errorf(api.CodeInvalidArgument, "unknown session kind %q", req.Kind).
			WithHint("kinds: shell, exec, sftp, forward")
	}
	for _, c := range []struct {
		field, v string
		max      int
	}{{"command", req.Command, MaxCommand}, {"recording", req.Recording, MaxRecording}, {"gateway", req.Gateway, MaxGateway}} {
		if err := checkText(c.field, c.v, c.max); err != nil {
			return api.TerminalSession{}, err
		}
	}
	s := api.TerminalSession{ID: ids.New(IDPrefix), UserID: req.UserID, AllocationID: req.AllocationID, Kind: req.Kind,
		Command: req.Command, StartedAt: now, State: api.SessionRunning, Recording: req.Recording, Gateway: req.Gateway}
	_, err := q.Exec(ctx, `INSERT INTO terminal_sessions (id, user_id, allocation_id, kind, command, started_at, recording, gateway)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8)`, s.ID, s.UserID, s.AllocationID, s.Kind, s.Command, s.StartedAt, s.Recording, s.Gateway)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23503" { // foreign_key_violation
		return api.TerminalSession{}, api.Errorf(api.CodeNotFound, "no user %s or no allocation %s", req.UserID, req.AllocationID)
	}
	if err != nil {
		return api.TerminalSession{}, fmt.Errorf("start session: %w", err)
	}
	return s, nil
}

// End records how a session ended: SessionEnded, or SessionInterrupted
// with req.Interrupted. Ending it again returns it unchanged, so a gateway
// that lost the first answer may simply repeat itself.
func End(ctx context.Context, q store.Querier, req gateproto.SessionEndRequest, now time.Time) (api.TerminalSession, error) {
	if req.Bytes < 0 {
		return api.TerminalSession{}, api.Errorf(api.CodeInvalidArgument, "bytes must not be negative")
	}
	if err := checkText("recording", req.Recording, MaxRecording); err != nil {
		return api.TerminalSession{}, err
	}
	// An empty recording keeps the one given at start.
	state := api.SessionEnded
	if req.Interrupted {
		state = api.SessionInterrupted
	}
	rows, err := q.Query(ctx, `UPDATE terminal_sessions SET ended_at = $2, bytes = $3, exit_status = $4,
		recording = CASE WHEN $5 = '' THEN recording ELSE $5 END, state = $6
		WHERE id = $1 AND state = 'running'
		RETURNING `+returned,
		req.ID, now, req.Bytes, req.ExitStatus, req.Recording, state)
	if err != nil {
		return api.TerminalSession{}, fmt.Errorf("end session: %w", err)
	}
	s, err := pgx.CollectExactlyOneRow(rows, scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return load(ctx, q, req.ID) // already ended, or not there at all
	}
	if err != nil {
		return api.TerminalSession{}, fmt.Errorf("end session: %w", err)
	}
	return s, nil
}

// Interrupt marks every session the gateway instance left running as
// SessionInterrupted, ended now, and returns them. The gateway calls it as
// it starts, before it serves: nothing it runs yet is in the index, so
// what is still running there was cut by its crash. Instances that share
// a name would cut each other's sessions: names are one per instance.
func Interrupt(ctx context.Context, q store.Querier, gateway string, now time.Time) ([]api.TerminalSession, error) {
	if gateway == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "gateway is required")
	}
	if err := checkText("gateway", gateway, MaxGateway); err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, `UPDATE terminal_sessions SET state = 'interrupted', ended_at = $2
		WHERE gateway = $1 AND state = 'running'
		RETURNING `+returned, gateway, now)
	if err != nil {
		return nil, fmt.Errorf("interrupt sessions of %s: %w", gateway, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("interrupt sessions of %s: %w", gateway, err)
	}
	return out, nil
}

func load(ctx context.Context, q store.Querier, id string) (api.TerminalSession, error) {
	rows, err := q.Query(ctx, columns+` WHERE id = $1`, id)
	if err != nil {
		return api.TerminalSession{}, fmt.Errorf("get session: %w", err)
	}
	s, err := pgx.CollectExactlyOneRow(rows, scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, notFound(id)
	}
	if err != nil {
		return s, fmt.Errorf("get session: %w", err)
	}
	return s, nil
}

func notFound(id string) error {
	return api.Errorf(api.CodeNotFound, "session %s not found", id).WithHint("see `gpuaas session list`")
}

// Viewer is who reads sessions: users see their own, operators all.
type Viewer struct {
	UserID   string
	Operator bool
}

// Get returns a session the viewer may see; others are "not found".
func Get(ctx context.Context, q store.Querier, v Viewer, id string) (api.TerminalSession, error) {
	s, err := load(ctx, q, id)
	if err != nil {
		return s, err
	}
	if !v.Operator && s.UserID != v.UserID {
		return api.TerminalSession{}, notFound(id)
	}
	return s, nil
}

// List returns the sessions the viewer may see, newest first, optionally
// of one allocation or one volume.
func List(ctx context.Context, q store.Querier, v Viewer, req api.SessionListRequest) ([]api.TerminalSession, error) {
	user := v.UserID
	if v.Operator {
		user = ""
	}
	rows, err := q.Query(ctx, columns+` WHERE ($1 = '' OR user_id = $1) AND ($2 = '' OR allocation_id = $2)
		AND ($4 = '' OR volume_id = $4)
		ORDER BY started_at DESC, id LIMIT $3`, user, req.AllocationID, ListLimit, req.VolumeID)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}
