// Package outbox owns outbox_events: domain code enqueues an event in the
// transaction of its change, the Relay publishes committed rows to
// JetStream exactly once per row, and the Fanout forwards them to users.
package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

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
	payload := []byte("{}")
	if ev.Payload != nil {
		var err error
		if payload, err = json.Marshal(ev.Payload); err != nil {
			return 0, fmt.Errorf("outbox payload: %w", err)
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
	var id int64
	// next_attempt_at comes from the caller's clock, like the relay's "due"
	// check, rather than the column's default of the database's now().
	// The correlation id of the request (or task) that made the change
	// rides in the payload object under corrPayload; the relay takes it
	// out into the event's Corr. (A column would need a migration.)
	err := q.QueryRow(ctx, `INSERT INTO outbox_events (kind, subject, project_id, users, payload, created_at, next_attempt_at)
		VALUES ($1,$2,$3,$4,CASE WHEN $7 <> '' AND jsonb_typeof($5::jsonb) = 'object'
			THEN $5::jsonb || jsonb_build_object('`+corrPayload+`', $7::text) ELSE $5::jsonb END,$6,$6) RETURNING id`,
		ev.Kind, ev.Subject, project, users, payload, at, corrid.From(ctx)).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("enqueue %s event: %w", ev.Kind, err)
	}
	return id, nil
}
