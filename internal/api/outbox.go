package api

import (
	"context"
	"time"
)

// Outbox event states.
const (
	OutboxPending   = "pending"
	OutboxPublished = "published"
	OutboxDead      = "dead"
	OutboxDropped   = "dropped"
)

// OutboxEvent is one row of the outbox, as operators see it.
type OutboxEvent struct {
	ID            int64     `json:"id"`
	Kind          string    `json:"kind"`
	Subject       string    `json:"subject"`
	ProjectID     string    `json:"project_id,omitempty"`
	Users         []string  `json:"users"`
	State         string    `json:"state"`
	Attempts      int       `json:"attempts"`
	LastError     string    `json:"last_error"`
	CreatedAt     time.Time `json:"created_at"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
}

// OutboxListRequest filters ops.outbox_list.
type OutboxListRequest struct {
	State string `json:"state,omitempty"` // default dead
	Limit int    `json:"limit,omitempty"` // default 100, at most 1000
}

// OutboxListResponse lists outbox events, oldest first.
type OutboxListResponse struct {
	Events []OutboxEvent `json:"events"`
}

// OutboxRef names one outbox event.
type OutboxRef struct {
	ID int64 `json:"id"`
}

// OutboxList lists outbox events (operators).
func (c *Client) OutboxList(ctx context.Context, req OutboxListRequest) (*OutboxListResponse, error) {
	return Do(ctx, c, OpOutboxList, req)
}

// OutboxRetry puts a dead event back in the relay's queue (admins); it
// answers the event as it now is.
func (c *Client) OutboxRetry(ctx context.Context, req OutboxRef, opts ...CallOption) (*OutboxEvent, error) {
	return Do(ctx, c, OpOutboxRetry, req, opts...)
}

// OutboxDrop gives up on a dead event (admins); it answers the event as it
// now is.
func (c *Client) OutboxDrop(ctx context.Context, req OutboxRef, opts ...CallOption) (*OutboxEvent, error) {
	return Do(ctx, c, OpOutboxDrop, req, opts...)
}
