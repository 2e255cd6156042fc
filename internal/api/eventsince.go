package api

import (
	"context"
	"fmt"
)

// MaxEventsSince bounds the events of one events.since answer.
const MaxEventsSince = 1000

// EventsSinceRequest asks for the caller's events with a stream sequence
// above After, at most Limit of them (MaxEventsSince if 0). Tail asks for
// no events, only the stream's position now (Next), where a client that
// has seen no event yet resumes from.
//
// Head makes the call cheap when nothing is new: controld first looks up
// the caller's head (the sequence of the last event fanned out to them)
// and reads the stream only when it is above After. A quiet subscription
// asks this every EventsHeadPoll, so that a lost last event is noticed
// without waiting for the next one (docs/decisions/0009-user-event-sequence.md).
type EventsSinceRequest struct {
	After uint64 `json:"after"`
	Limit int    `json:"limit,omitempty"`
	Tail  bool   `json:"tail,omitempty"`
	Head  bool   `json:"head,omitempty"`
}

// EventsSinceResponse holds the caller's events after the request's
// sequence, in stream order. Next is the sequence to ask after next time;
// More says the answer stopped at Limit (or at the scan bound) before the
// stream's end. First is the oldest sequence the stream still holds; when
// events after After were already dropped by the stream's retention,
// Missed counts the stream sequences lost (everyone's events, not only
// the caller's) and Events start at First.
type EventsSinceResponse struct {
	Events []Event `json:"events"`
	Next   uint64  `json:"next"`
	More   bool    `json:"more,omitempty"`
	First  uint64  `json:"first"`
	Missed uint64  `json:"missed,omitempty"`
	// Head is the sequence of the caller's last fanned-out event, when the
	// request asked for it and controld knows it (0 otherwise).
	Head uint64 `json:"head,omitempty"`
}

// EventsSince calls events.since.
func (c *Client) EventsSince(ctx context.Context, req EventsSinceRequest) (*EventsSinceResponse, error) {
	return Do(ctx, c, OpEventsSince, req)
}

// EventsGap is the kind of the event a subscription delivers, in place of
// events the stream's retention dropped before the client could be sent
// them again. Its Data is an EventsGapData; its Seq is the first sequence
// after the gap.
const EventsGap = "events.gap"

// EventsGapData is the payload of an EventsGap event.
type EventsGapData struct {
	// After is the last sequence the client saw; First the oldest the
	// stream still held; Missed how many sequences (of every user's
	// events) were lost between them.
	After  uint64 `json:"after"`
	First  uint64 `json:"first"`
	Missed uint64 `json:"missed"`
}

// String says what a gap lost, for a warning.
func (g EventsGapData) String() string {
	return fmt.Sprintf("events after #%d were dropped by the event stream's retention before they could be resent "+
		"(%d stream events lost; the oldest kept is #%d): re-read the state you follow", g.After, g.Missed, g.First)
}
