// Package outbox owns outbox_events: domain code enqueues an event in the
// transaction of its change, the Relay publishes committed rows to
// JetStream exactly once per row, and the Fanout forwards them to users.
package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/corrid"
)

// Event is a domain change waiting to be published.
type Event struct {
	Kind      string   // api.EventAllocState, ...
	Subject   string   // the id of what changed
	ProjectID string   // optional
	Users     []string // who is told (fanned out to gpuaas.user.<uid>.evt.<kind>)
	Payload   any
}

// corrPayload is the key of an event row's payload that holds the
// correlation id; the relay moves it to api.Event.Corr.
const corrPayload = "_correlation_id"

// Enqueue inserts ev as a pending row and returns its id. The correlation
// id ctx carries goes with it (api.Event.Corr).
func Enqueue(ctx context.Context, q store.Querier, at time.Time, ev Event) (int64, error) {
	args, err := enqueueArgs(ctx, at, ev)
	if err != nil {
		return 0, err
	}
	var id int64
	if err := q.QueryRow(ctx, enqueueSQL+` RETURNING id`, args...).Scan(&id); err != nil {
		return 0, fmt.Errorf("enqueue %s event: %w", ev.Kind, err)
	}
	return id, nil
}

// QueueEnqueue queues Enqueue's insert in b (without the id), so that a
// mutation's trailing rows go in one round trip; its error comes back
// when the batch's results are read.
func QueueEnqueue(ctx context.Context, b *pgx.Batch, at time.Time, ev Event) error {
	args, err := enqueueArgs(ctx, at, ev)
	if err != nil {
		return err
	}
	// Fn rather than Exec(fn): Exec's callback sees only successes.
	b.Queue(enqueueSQL, args...).Fn = func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("enqueue %s event: %w", ev.Kind, err)
		}
		return nil
	}
	return nil
}

// enqueueSQL sets next_attempt_at from the caller's clock, like the
// relay's "due" check, rather than the column's default of the database's
// now(). The correlation id of the request (or task) that made the change
// rides in the payload object under corrPayload; the relay takes it out
// into the event's Corr. (A column would need a migration.)
const enqueueSQL = `INSERT INTO outbox_events (kind, subject, project_id, users, payload, created_at, next_attempt_at)
		VALUES ($1,$2,$3,$4,CASE WHEN $7 <> '' AND jsonb_typeof($5::jsonb) = 'object'
			THEN $5::jsonb || jsonb_build_object('` + corrPayload + `', $7::text) ELSE $5::jsonb END,$6,$6)`

func enqueueArgs(ctx context.Context, at time.Time, ev Event) ([]any, error) {
	payload := []byte("{}")
	if ev.Payload != nil {
		var err error
		if payload, err = json.Marshal(ev.Payload); err != nil {
			return nil, fmt.Errorf("outbox payload: %w", err)
		}
	}
	var project *string
	if ev.ProjectID != "" {
		project = &ev.ProjectID
	}
	users := ev.Users
	if users == nil {
		users = []string{}
	}
	return []any{ev.Kind, ev.Subject, project, users, payload, at, corrid.From(ctx)}, nil
}
