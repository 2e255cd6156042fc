package api

import (
	"context"
	"time"
)

// EventWebhook tells a project's members one of its webhooks was added or
// removed; the Data is a Webhook (never its secret).
const EventWebhook = "webhook.changed"

// EventWebhookDelivery tells a project's members a delivery was queued by
// hand (webhook.test, webhook.retry); the Data is a WebhookDelivery.
const EventWebhookDelivery = "webhook.delivery"

// WebhookTestKind is the kind of the delivery `gpuaas webhook test` sends.
const WebhookTestKind = "webhook.test"

// WebhookEvents are the event kinds a webhook may subscribe to: those that
// belong to a project (docs/webhooks.md).
var WebhookEvents = []string{
	EventAllocState, EventAllocProgress, EventAllocNotice,
	EventBillingLowBalance, EventBillingDepleted, EventBillingBudget, EventBillingBudgetChanged,
	EventTopup, EventRefund, EventAdjustment,
	EventProject, EventProjectPolicy, EventWebhook,
	EventJobState, EventVolume, EventImage,
}

// Delivery states: pending until the receiver answers 2xx (delivered) or
// every attempt failed (dead; `gpuaas webhook retry` makes it pending).
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryDead      = "dead"
)

// Webhook is a project's subscription of an HTTPS URL to event kinds.
type Webhook struct {
	ID        string    `json:"id"`
	ProjectID string    `json:"project_id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	// RemovedAt is set once the webhook is removed (webhook.rm).
	RemovedAt *time.Time `json:"removed_at,omitempty"`
	// Secret signs the deliveries (HMAC-SHA256, docs/webhooks.md); it is
	// in the reply of webhook.add only, and never stored for a replay.
	Secret string `json:"secret,omitempty"`
}

// WebhookAddRequest subscribes URL to Events in Project ("" is the
// caller's current project).
type WebhookAddRequest struct {
	Project string   `json:"project,omitempty"`
	URL     string   `json:"url"`
	Events  []string `json:"events"`
}

// WebhookListRequest names the project whose webhooks to list.
type WebhookListRequest struct {
	Project string `json:"project,omitempty"`
}

// WebhookList is a project's webhooks.
type WebhookList struct {
	Webhooks []Webhook `json:"webhooks"`
}

// WebhookRef names a webhook.
type WebhookRef struct {
	ID string `json:"id"`
}

// WebhookDelivery is one event sent (or to be sent) to one webhook. ID is
// the same on every attempt: receivers drop repeats by it.
type WebhookDelivery struct {
	ID            string     `json:"id"`
	WebhookID     string     `json:"webhook_id"`
	EventKind     string     `json:"event_kind"`
	EventSeq      uint64     `json:"event_seq,omitempty"`
	State         string     `json:"state"`
	Attempts      int        `json:"attempts"`
	LastStatus    int        `json:"last_status,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	DeliveredAt   *time.Time `json:"delivered_at,omitempty"`
}

// WebhookDeliveriesRequest lists the deliveries of a webhook (or of every
// webhook of Project), newest first, optionally of one State.
type WebhookDeliveriesRequest struct {
	Project string `json:"project,omitempty"`
	Webhook string `json:"webhook,omitempty"`
	State   string `json:"state,omitempty"`
	Limit   int    `json:"limit,omitempty"`
}

// WebhookDeliveryList is a page of deliveries.
type WebhookDeliveryList struct {
	Deliveries []WebhookDelivery `json:"deliveries"`
}

// WebhookDeliveryRef names a delivery.
type WebhookDeliveryRef struct {
	ID string `json:"id"`
}

// WebhookAdd subscribes a URL to events; the reply carries the signing
// secret, shown once.
func (c *Client) WebhookAdd(ctx context.Context, req WebhookAddRequest, opts ...CallOption) (*Webhook, error) {
	return Do(ctx, c, OpWebhookAdd, req, opts...)
}

// WebhookList lists a project's webhooks.
func (c *Client) WebhookList(ctx context.Context, req WebhookListRequest) (*WebhookList, error) {
	return Do(ctx, c, OpWebhookList, req)
}

// WebhookRemove removes a webhook; its pending deliveries are dropped.
func (c *Client) WebhookRemove(ctx context.Context, req WebhookRef, opts ...CallOption) (*Webhook, error) {
	return Do(ctx, c, OpWebhookRemove, req, opts...)
}

// WebhookTest queues a webhook.test delivery to a webhook.
func (c *Client) WebhookTest(ctx context.Context, req WebhookRef, opts ...CallOption) (*WebhookDelivery, error) {
	return Do(ctx, c, OpWebhookTest, req, opts...)
}

// WebhookDeliveries lists deliveries.
func (c *Client) WebhookDeliveries(ctx context.Context, req WebhookDeliveriesRequest) (*WebhookDeliveryList, error) {
	return Do(ctx, c, OpWebhookDeliveries, req)
}

// WebhookRetry makes a dead delivery pending again.
func (c *Client) WebhookRetry(ctx context.Context, req WebhookDeliveryRef, opts ...CallOption) (*WebhookDelivery, error) {
	return Do(ctx, c, OpWebhookRetry, req, opts...)
}
