package api

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// seenEvents is how many recent event ids a subscription remembers to drop
// the repeats of at-least-once delivery.
const seenEvents = 4096

// SubscribeEvents streams the events controld fans out to userID
// (gpuaas.user.<uid>.evt.>) until ctx ends; then the channel is closed.
// The subscription is registered with the server before it returns, so
// state read after the call cannot miss a change the stream then lacks:
// subscribe first, then read, then follow the stream. Repeats are dropped
// by event id and stream sequence; undecodable messages are skipped.
//
// No event is lost to a reconnect or to a slow reader: the fan-out
// delivers at most once per connection, so after the connection came back
// (or the client library dropped messages it could not hold) the
// subscription asks controld for the caller's events after the last
// sequence it delivered (events.since) and sends those first, in stream
// order. Events the stream's retention dropped in the meantime are
// replaced by one EventsGap event.
//
// Nor is one lost silently while the connection stays up (a route between
// NATS servers cut, a server gone with the message still queued to
// another): each event carries the stream sequence of the caller's
// previous one (Event.Prev), and an event whose Prev was not delivered
// makes the subscription read the missing ones back first, in order; a
// subscription quiet for EventsHeadPoll asks controld whether it was sent
// anything more (events.since with Head). See
// docs/decisions/0009-user-event-sequence.md. When the channel closes
// before ctx ends, SubscriptionEnded says why.
func (c *Client) SubscribeEvents(ctx context.Context, userID string, opts ...SubscribeOption) (<-chan Event, error) {
	if userID == "" || strings.ContainsAny(userID, ".*> \t") {
		return nil, fmt.Errorf("subscribe events: bad user id %q", userID)
	}
	sub, err := c.nc.SubscribeSync(UserEventWildcard(userID))
	if err != nil {
		return nil, fmt.Errorf("subscribe events: %w", err)
	}
	fctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	if err := c.nc.FlushWithContext(fctx); err != nil {
		_ = sub.Unsubscribe()
		return nil, transportError("events", err)
	}
	f := &follower{c: c, sub: sub, out: make(chan Event), seen: newIDSet(seenEvents), reconnects: c.nc.Stats().Reconnects}
	for _, o := range opts {
		o(f)
	}
	// Where to resume from if the connection drops before any event came:
	// the stream's position now. A controld without events.since leaves it
	// 0, and resuming then starts at the first event seen.
	if pos, err := c.EventsSince(fctx, EventsSinceRequest{Tail: true}); err == nil {
		f.last, f.floor, f.positioned = pos.Next, pos.Next, true
	}
	go f.run(ctx)
	return f.out, nil
}

// EventSessionRevoked is emitted whenever sessions end before their
// expiry: logout, an administrator disabling the user, or any other
// revocation. controld closes the sessions' NATS connections on it and
// sshgate ends their SSH sessions (see gateproto.GateRevokedSubject).
const EventSessionRevoked = "session.revoked"

// SessionRevoked is the payload of EventSessionRevoked.
type SessionRevoked struct {
	UserID     string   `json:"user_id"`
	SessionIDs []string `json:"session_ids"`
	// Reason is "logout", "disabled" or another short word.
	Reason string `json:"reason"`
}

// EventAllocNotice is a message for the people using one allocation: an
// idle warning, a budget warning, a quarantined GPU. It reaches them in
// `watch` and the TUI like every event, and sshgate writes its Message
// into every open session of the allocation (see gateproto.GateNoticeSubject). The
// event's Subject is the allocation id; its Data an AllocNotice.
const EventAllocNotice = "alloc.notice"

// Kinds of AllocNotice.
const (
	NoticeIdleWarning = "idle_warning" // released for idleness at Deadline unless used
	NoticeMaxDuration = "max_duration" // released at Deadline: its maximum duration
	NoticeBudget      = "budget"       // a budget crossed its warning or its cap
	NoticeQuarantine  = "quarantine"   // one of its GPUs failed and was quarantined
)

// AllocNotice is the payload of EventAllocNotice.
type AllocNotice struct {
	AllocationID string `json:"allocation_id"`
	// Kind is one of the Notice* constants.
	Kind string `json:"kind"`
	// Message is one line for a person, written as is into sessions.
	Message string `json:"message"`
	// Deadline is when the announced action happens, if it is one.
	Deadline *time.Time `json:"deadline,omitempty"`
	// At is when controld raised it (alloc.get's Notices; the event's own
	// At in a stream).
	At time.Time `json:"at,omitzero"`
}
