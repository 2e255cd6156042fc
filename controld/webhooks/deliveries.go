package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

const deliveryCols = `id, webhook_id, event_kind, event_seq, state, attempts, last_status, last_error,
	next_attempt_at, created_at, delivered_at`

func scanDelivery(r pgx.CollectableRow) (api.WebhookDelivery, error) {
	var d api.WebhookDelivery
	var seq int64
	var next time.Time
	err := r.Scan(&d.ID, &d.WebhookID, &d.EventKind, &seq, &d.State, &d.Attempts, &d.LastStatus, &d.LastError,
		&next, &d.CreatedAt, &d.DeliveredAt)
	d.EventSeq, d.CreatedAt = uint64(seq), d.CreatedAt.UTC()
	if d.State == api.DeliveryPending {
		next = next.UTC()
		d.NextAttemptAt = &next
	}
	return d, err
}

// MaxListed bounds a page of Deliveries.
const MaxListed = 500

// Deliveries lists the deliveries of projectID's webhooks (of one webhook
// when webhookID is set; of one state when state is), newest first.
func Deliveries(ctx context.Context, q store.Querier, projectID, webhookID, state string, limit int) ([]api.WebhookDelivery, error) {
	switch state {
	case "", api.DeliveryPending, api.DeliveryDelivered, api.DeliveryDead:
	default:
		return nil, api.Errorf(api.CodeInvalidArgument, "unknown delivery state %q", state).
			WithHint("states: pending, delivered, dead")
	}
	if limit <= 0 || limit > MaxListed {
		limit = MaxListed
	}
	rows, err := q.Query(ctx, `SELECT d.id, d.webhook_id, d.event_kind, d.event_seq, d.state, d.attempts, d.last_status,
		d.last_error, d.next_attempt_at, d.created_at, d.delivered_at FROM webhook_deliveries d
		JOIN webhooks w ON w.id = d.webhook_id
		WHERE w.project_id = $1 AND ($2 = '' OR d.webhook_id = $2) AND ($3 = '' OR d.state = $3)
		ORDER BY d.created_at DESC, d.id LIMIT $4`, projectID, webhookID, state, limit)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	ds, err := pgx.CollectRows(rows, scanDelivery)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return ds, nil
}

// DeliveryProject returns the project of a delivery's webhook, to check
// the caller's role before Retry.
func DeliveryProject(ctx context.Context, q store.Querier, id string) (string, error) {
	var p string
	err := q.QueryRow(ctx, `SELECT w.project_id FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
		WHERE d.id = $1 AND w.removed_at IS NULL`, id).Scan(&p)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", api.Errorf(api.CodeNotFound, "no delivery %s", id).WithHint("see `gpuaas webhook deliveries`")
	}
	if err != nil {
		return "", fmt.Errorf("find delivery: %w", err)
	}
	return p, nil
}

// Retry makes a dead delivery pending again, with its attempts reset; it
// goes out with the same id. A delivery that is not dead is refused.
func Retry(ctx context.Context, q store.Querier, id string, now time.Time) (api.WebhookDelivery, error) {
	rows, err := q.Query(ctx, `UPDATE webhook_deliveries SET state = 'pending', attempts = 0, next_attempt_at = $2,
		last_error = '' WHERE id = $1 AND state = 'dead' RETURNING `+deliveryCols, id, now.UTC())
	if err != nil {
		return api.WebhookDelivery{}, fmt.Errorf("retry delivery: %w", err)
	}
	d, err := pgx.CollectExactlyOneRow(rows, scanDelivery)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.WebhookDelivery{}, api.Errorf(api.CodeConflict, "delivery %s is not dead", id).
			WithHint("only dead deliveries are retried; pending ones are still being sent")
	}
	if err != nil {
		return api.WebhookDelivery{}, fmt.Errorf("retry delivery: %w", err)
	}
	return d, nil
}

// Counts returns how many deliveries are pending and dead, by state.
func Counts(ctx context.Context, q store.Querier) (map[string]int, error) {
	rows, err := q.Query(ctx, `SELECT state, count(*) FROM webhook_deliveries WHERE state <> 'delivered' GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count deliveries: %w", err)
	}
	out := map[string]int{}
	var state string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&state, &n}, func() error { out[state] = n; return nil })
	if err != nil {
		return nil, fmt.Errorf("count deliveries: %w", err)
	}
	return out, nil
}
