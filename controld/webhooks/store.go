package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// Id prefixes of webhooks and deliveries.
const (
	webhookPrefix  = "wh"
	deliveryPrefix = "whd"
)

// MaxPerProject bounds a project's webhooks.
const MaxPerProject = 20

const webhookCols = `id, project_id, url, events, created_by, created_at, removed_at`

func scanWebhook(r pgx.CollectableRow) (api.Webhook, error) {
	var w api.Webhook
	err := r.Scan(&w.ID, &w.ProjectID, &w.URL, &w.Events, &w.CreatedBy, &w.CreatedAt, &w.RemovedAt)
	w.CreatedAt = w.CreatedAt.UTC()
	return w, err
}

// Add stores a webhook of projectID with a fresh secret, which the
// returned Webhook carries (shown once). url and events are checked by
// the caller (Policy.CheckURL, CheckEvents).
func Add(ctx context.Context, q store.Querier, projectID, url string, events []string, by string, now time.Time) (api.Webhook, error) {
	var n int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM webhooks WHERE project_id = $1 AND removed_at IS NULL`,
		projectID).Scan(&n); err != nil {
		return api.Webhook{}, fmt.Errorf("count webhooks: %w", err)
	}
	if n >= MaxPerProject {
		return api.Webhook{}, api.Errorf(api.CodeInvalidArgument, "the project has %d webhooks, the most it may have", n).
			WithHint("remove one with `gpuaas webhook rm ID`")
	}
	w := api.Webhook{ID: ids.New(webhookPrefix), ProjectID: projectID, URL: url, Events: events, CreatedBy: by,
		CreatedAt: now.UTC(), Secret: newSecret()}
	if _, err := q.Exec(ctx, `INSERT INTO webhooks (id, project_id, url, events, secret, created_by, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, w.ID, w.ProjectID, w.URL, w.Events, w.Secret, w.CreatedBy, w.CreatedAt); err != nil {
		return api.Webhook{}, fmt.Errorf("add webhook: %w", err)
	}
	return w, nil
}

// List returns a project's webhooks, oldest first, without secrets.
func List(ctx context.Context, q store.Querier, projectID string) ([]api.Webhook, error) {
	rows, err := q.Query(ctx, `SELECT `+webhookCols+` FROM webhooks
		WHERE project_id = $1 AND removed_at IS NULL ORDER BY created_at, id`, projectID)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	ws, err := pgx.CollectRows(rows, scanWebhook)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return ws, nil
}

// Get returns a webhook that is not removed; not_found otherwise. The
// caller checks the caller's role in its project.
func Get(ctx context.Context, q store.Querier, id string) (api.Webhook, error) {
	rows, err := q.Query(ctx, `SELECT `+webhookCols+` FROM webhooks WHERE id = $1 AND removed_at IS NULL`, id)
	if err != nil {
		return api.Webhook{}, fmt.Errorf("get webhook: %w", err)
	}
	w, err := pgx.CollectExactlyOneRow(rows, scanWebhook)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Webhook{}, api.Errorf(api.CodeNotFound, "no webhook %s", id).WithHint("see `gpuaas webhook list`")
	}
	if err != nil {
		return api.Webhook{}, fmt.Errorf("get webhook: %w", err)
	}
	return w, nil
}

// Remove marks a webhook removed and drops its undelivered deliveries
// (delivered ones stay, as its history, until they age out).
func Remove(ctx context.Context, q store.Querier, id string, now time.Time) (api.Webhook, error) {
	rows, err := q.Query(ctx, `UPDATE webhooks SET removed_at = $2 WHERE id = $1 AND removed_at IS NULL
		RETURNING `+webhookCols, id, now.UTC())
	if err != nil {
		return api.Webhook{}, fmt.Errorf("remove webhook: %w", err)
	}
	w, err := pgx.CollectExactlyOneRow(rows, scanWebhook)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Webhook{}, api.Errorf(api.CodeNotFound, "no webhook %s", id).WithHint("see `gpuaas webhook list`")
	}
	if err != nil {
		return api.Webhook{}, fmt.Errorf("remove webhook: %w", err)
	}
	if _, err := q.Exec(ctx, `DELETE FROM webhook_deliveries WHERE webhook_id = $1 AND state <> 'delivered'`, id); err != nil {
		return api.Webhook{}, fmt.Errorf("remove webhook deliveries: %w", err)
	}
	return w, nil
}

// body is what a delivery posts: the event, under the delivery's id.
type body struct {
	ID        string          `json:"id"`
	Kind      string          `json:"kind"`
	At        time.Time       `json:"at"`
	ProjectID string          `json:"project_id"`
	Subject   string          `json:"subject,omitempty"`
	Seq       uint64          `json:"seq,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
}

// EnqueueTest queues a webhook.test delivery to w.
func EnqueueTest(ctx context.Context, q store.Querier, w api.Webhook, now time.Time) (api.WebhookDelivery, error) {
	id := ids.New(deliveryPrefix)
	data, _ := json.Marshal(map[string]string{"webhook_id": w.ID, "url": w.URL})
	b, err := json.Marshal(body{ID: id, Kind: api.WebhookTestKind, At: now.UTC(), ProjectID: w.ProjectID, Subject: w.ID, Data: data})
	if err != nil {
		return api.WebhookDelivery{}, err
	}
	rows, err := q.Query(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, event_seq, event_kind, body, state,
		next_attempt_at, created_at) VALUES ($1, $2, 0, $3, $4, 'pending', $5, $5) RETURNING `+deliveryCols,
		id, w.ID, api.WebhookTestKind, b, now.UTC())
	if err != nil {
		return api.WebhookDelivery{}, fmt.Errorf("queue test delivery: %w", err)
	}
	d, err := pgx.CollectExactlyOneRow(rows, scanDelivery)
	if err != nil {
		return api.WebhookDelivery{}, fmt.Errorf("queue test delivery: %w", err)
	}
	return d, nil
}
