package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/lease"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// States lists the states an operator may list.
var States = []string{api.OutboxPending, api.OutboxPublished, api.OutboxDead, api.OutboxDropped}

const eventColumns = `id, kind, subject, coalesce(project_id, ''), users, state, attempts, last_error, created_at, next_attempt_at`

func scanEvent(r pgx.CollectableRow) (api.OutboxEvent, error) {
	var e api.OutboxEvent
	err := r.Scan(&e.ID, &e.Kind, &e.Subject, &e.ProjectID, &e.Users, &e.State, &e.Attempts, &e.LastError,
		&e.CreatedAt, &e.NextAttemptAt)
	e.CreatedAt, e.NextAttemptAt = e.CreatedAt.UTC(), e.NextAttemptAt.UTC()
	return e, err
}

// List returns up to limit events in state, oldest first.
func List(ctx context.Context, q store.Querier, state string, limit int) ([]api.OutboxEvent, error) {
	rows, err := q.Query(ctx, `SELECT `+eventColumns+` FROM outbox_events WHERE state = $1 ORDER BY id LIMIT $2`, state, limit)
	if err != nil {
		return nil, fmt.Errorf("list outbox events: %w", err)
	}
	events, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("list outbox events: %w", err)
	}
	return events, nil
}

// Retry puts dead event id back in the relay's queue, due now, with its
// attempts reset; the relay is woken when tx commits.
func Retry(ctx context.Context, tx pgx.Tx, id int64, now time.Time) (api.OutboxEvent, error) {
	e, err := changeDead(ctx, tx, id, `UPDATE outbox_events SET state = 'pending', attempts = 0, next_attempt_at = $2
		WHERE id = $1 AND state = 'dead' RETURNING `+eventColumns, now)
	if err != nil {
		return e, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify('outbox_events', '')`); err != nil {
		return e, fmt.Errorf("wake relay: %w", err)
	}
	return e, nil
}

// Drop gives up on dead event id: it stays, in state dropped, and is
// never published.
func Drop(ctx context.Context, tx pgx.Tx, id int64) (api.OutboxEvent, error) {
	return changeDead(ctx, tx, id, `UPDATE outbox_events SET state = 'dropped'
		WHERE id = $1 AND state = 'dead' RETURNING `+eventColumns)
}

// changeDead runs update, which changes event id only while it is dead,
// and tells apart an unknown id from an event in another state.
func changeDead(ctx context.Context, tx pgx.Tx, id int64, update string, args ...any) (api.OutboxEvent, error) {
	rows, err := tx.Query(ctx, update, append([]any{id}, args...)...)
	if err != nil {
		return api.OutboxEvent{}, fmt.Errorf("change outbox event %d: %w", id, err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, scanEvent)
	if err == nil {
		return e, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return e, fmt.Errorf("change outbox event %d: %w", id, err)
	}
	var state string
	err = tx.QueryRow(ctx, `SELECT state FROM outbox_events WHERE id = $1`, id).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, api.Errorf(api.CodeNotFound, "no outbox event %d", id).
			WithHint("see `gpuaas ops outbox list` for the dead ones")
	}
	if err != nil {
		return e, fmt.Errorf("look up outbox event %d: %w", id, err)
	}
	return e, api.Errorf(api.CodeConflict, "outbox event %d is %s, not dead", id, state)
}

// Counts returns how many events are pending and how many dead.
func Counts(ctx context.Context, q store.Querier) (pending, dead int, err error) {
	err = q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'dead')
		FROM outbox_events WHERE state IN ('pending', 'dead')`).Scan(&pending, &dead)
	if err != nil {
		return 0, 0, fmt.Errorf("count outbox events: %w", err)
	}
	return pending, dead, nil
}

// RelayHolder returns the fencing epoch of the relay's lease while a
// replica holds it (the active relay), or 0 when none does: a different
// number is another holding.
func RelayHolder(ctx context.Context, q store.Querier) (int, error) {
	return lease.HeldEpoch(ctx, q, lease.OutboxRelay)
}
