package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
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
func (c *Client) SubscribeEvents(ctx context.Context, userID string) (<-chan Event, error) {
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
	// Where to resume from if the connection drops before any event came:
	// the stream's position now. A controld without events.since leaves it
	// 0, and resuming then starts at the first event seen.
	if pos, err := c.EventsSince(fctx, EventsSinceRequest{Tail: true}); err == nil {
		f.last, f.floor, f.positioned = pos.Next, pos.Next, true
	}
	go f.run(ctx)
	return f.out, nil
}

// resumePoll is how often a quiet subscription checks whether its
// connection came back, to fetch what it missed without waiting for the
// next live event.
const resumePoll = 250 * time.Millisecond

// resumeSettle is how long after a reconnect a subscription reads its
// events from the stream rather than live: in a cluster the new server
// tells the others of the subscription asynchronously, and a server that
// has not heard yet drops the fan-out's messages for it. They are in the
// stream, below the end a later events.since reads; a live one delivered
// first would move the resume point past them.
const resumeSettle = 2 * time.Second

// resumeRetry is the pause between failed events.since calls.
const resumeRetry = 500 * time.Millisecond

// follower is one subscription's delivery loop; only run's goroutine
// touches it after SubscribeEvents returns.
type follower struct {
	c    *Client
	sub  *nats.Subscription
	out  chan Event
	seen *idSet
	// last is the highest stream sequence delivered (or skipped as not
	// ours): resuming reads what follows it.
	last uint64
	// floor is the stream's position at subscribe: events at or below it
	// came before the subscription.
	floor uint64
	// positioned is set once last is a stream position (0 for a stream
	// still empty at subscribe), so resuming reads from it, not the tail.
	positioned bool
	reconnects uint64
	dropped    int
}

func (f *follower) run(ctx context.Context) {
	defer close(f.out)
	defer func() { _ = f.sub.Unsubscribe() }()
	// settleUntil, when set, ends the reads from the stream after a
	// reconnect (resumeSettle); lastResume is the last such read.
	var settleUntil, lastResume time.Time
	for {
		pctx, cancel := context.WithTimeout(ctx, resumePoll)
		m, err := f.sub.NextMsgWithContext(pctx)
		cancel()
		if ctx.Err() != nil || (err != nil && !errors.Is(err, context.DeadlineExceeded)) {
			return // ctx ended, or the connection closed under us
		}
		if f.missedSome() {
			settleUntil, lastResume = time.Now().Add(resumeSettle), time.Time{}
		}
		if !settleUntil.IsZero() {
			// A live message is in the stream already, below the end
			// the next read reaches: that read delivers it, in order.
			if now := time.Now(); now.Sub(lastResume) >= resumePoll || now.After(settleUntil) {
				if !f.resume(ctx) {
					return
				}
				if lastResume = time.Now(); lastResume.After(settleUntil) {
					settleUntil = time.Time{}
				}
			}
			continue
		}
		if m == nil {
			continue
		}
		var ev Event
		if json.Unmarshal(m.Data, &ev) != nil {
			continue
		}
		if !f.send(ctx, ev) {
			return
		}
	}
}

// missedSome reports whether live events may have been lost since the
// last check: the connection was re-established, or the client library
// dropped messages of this subscription (a slow consumer).
func (f *follower) missedSome() bool {
	missed := false
	if r := f.c.nc.Stats().Reconnects; r != f.reconnects {
		f.reconnects, missed = r, true
	}
	if d, err := f.sub.Dropped(); err == nil && d != f.dropped {
		f.dropped, missed = d, true
	}
	return missed
}

// send delivers ev unless it is a repeat; false when ctx ended.
func (f *follower) send(ctx context.Context, ev Event) bool {
	// Live events can arrive out of stream order: in a NATS cluster two
	// controld replicas fan out through different servers, and routes do
	// not order each other's messages. A later one delivered first must
	// not hide an earlier one arriving just after (the cluster fault test
	// lost such events): repeats are told by id, and only what the stream
	// held before the subscription is skipped by sequence.
	if ev.Seq != 0 {
		if ev.Seq <= f.floor {
			return true // before we subscribed
		}
		f.last = max(f.last, ev.Seq)
	}
	if ev.Kind != EventsGap && !f.seen.add(ev.ID) {
		return true
	}
	select {
	case f.out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// resume delivers the caller's events after the last one delivered, read
// from the stream through controld, retrying until controld answers. It
// returns false when ctx ended or the connection closed for good.
func (f *follower) resume(ctx context.Context) bool {
	for {
		req := EventsSinceRequest{After: f.last, Tail: f.last == 0 && !f.positioned}
		resp, err := f.c.EventsSince(ctx, req)
		if err != nil {
			if ctx.Err() != nil || f.c.nc.IsClosed() {
				return false
			}
			select {
			case <-time.After(resumeRetry):
				continue
			case <-ctx.Done():
				return false
			}
		}
		if resp.Missed > 0 {
			gap, _ := json.Marshal(EventsGapData{After: f.last, First: resp.First, Missed: resp.Missed})
			if !f.send(ctx, Event{Kind: EventsGap, At: time.Now().UTC(), Seq: resp.First - 1, Data: gap}) {
				return false
			}
		}
		for _, ev := range resp.Events {
			if !f.send(ctx, ev) {
				return false
			}
		}
		if resp.Next > f.last {
			f.last = resp.Next
		}
		f.positioned = true
		if !resp.More {
			return true
		}
	}
}

// idSet remembers the last n ids added.
type idSet struct {
	ids  map[int64]struct{}
	ring []int64
	next int
}

func newIDSet(n int) *idSet {
	return &idSet{ids: make(map[int64]struct{}, n), ring: make([]int64, 0, n)}
}

// add records id and reports whether it was new.
func (s *idSet) add(id int64) bool {
	if _, ok := s.ids[id]; ok {
		return false
	}
	if len(s.ring) < cap(s.ring) {
		s.ring = append(s.ring, id)
	} else {
		delete(s.ids, s.ring[s.next])
		s.ring[s.next] = id
		s.next = (s.next + 1) % len(s.ring)
	}
	s.ids[id] = struct{}{}
	return true
}

// EventSessionRevoked is emitted whenever sessions end before their
// expiry: logout, an administrator disabling the user, or any other
// revocation. controld closes the sessions' NATS connections on it and
// sshgate ends their SSH sessions (see GateRevokedSubject).
const EventSessionRevoked = "session.revoked"

// SessionRevoked is the payload of EventSessionRevoked.
type SessionRevoked struct {
	UserID     string   `json:"user_id"`
	SessionIDs []string `json:"session_ids"`
	// Reason is "logout", "disabled" or another short word.
	Reason string `json:"reason"`
}

// GateRevokedSubject is where controld tells every sshgate which sessions
// were revoked (a SessionRevoked body). Only controld may publish to it.
const GateRevokedSubject = "gpuaas.gate.revoked"

// EventAllocNotice is a message for the people using one allocation: an
// idle warning, a budget warning, a quarantined GPU. It reaches them in
// `watch` and the TUI like every event, and sshgate writes its Message
// into every open session of the allocation (see GateNoticeSubject). The
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
}

// GateNoticeSubject is where controld's event fan-out hands every
// EventAllocNotice (an Event body) to the sshgates, which write its
// message into the allocation's open sessions. Only controld may publish
// to it; only gateways may subscribe.
const GateNoticeSubject = "gpuaas.gate.notice"
