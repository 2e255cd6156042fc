package api

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// resumePoll is how often a quiet subscription checks whether its
// connection came back, to fetch what it missed without waiting for the
// next live event.
const resumePoll = 250 * time.Millisecond

// EventsHeadPoll is how long a subscription stays quiet before it asks
// controld whether it was sent an event it did not get (events.since with
// Head): a lost last event has no successor whose Prev would tell. So a
// lost event is noticed within EventsHeadPoll and a round trip.
const EventsHeadPoll = 750 * time.Millisecond

// resumeSettle is how long after a reconnect a subscription reads its
// events from the stream rather than live: in a cluster the new server
// tells the others of the subscription asynchronously, and a server that
// has not heard yet drops the fan-out's messages for it. They are in the
// stream, below the end a later events.since reads; a live one delivered
// first would move the resume point past them.
const resumeSettle = 2 * time.Second

// resumeRetry is the pause between failed events.since calls.
const resumeRetry = 500 * time.Millisecond

// Causes of an EventsRefill.
const (
	RefillReconnect = "reconnect" // the connection came back, or the library dropped messages
	RefillChain     = "chain"     // a live event's Prev was not delivered
	RefillHead      = "head"      // a quiet subscription's head check found more
)

// EventsRefill reports events a subscription read back from the stream
// (events.since) because they did not arrive live.
type EventsRefill struct {
	// Cause is one of the Refill* constants.
	Cause string
	// After is the last sequence the subscription had everything up to;
	// Events how many of the caller's events the read delivered (none of
	// them delivered before; with RefillChain, the live event that showed
	// the gap is one of them).
	After  uint64
	Events int
}

// SubscribeOption adjusts SubscribeEvents.
type SubscribeOption func(*follower)

// OnRefill has f called, from the subscription's goroutine, each time
// events that did not arrive live were read back; for diagnostics (the
// CLI's GPUAAS_DEBUG) and tests.
func OnRefill(f func(EventsRefill)) SubscribeOption {
	return func(fl *follower) { fl.onRefill = f }
}

// follower is one subscription's delivery loop; only run's goroutine
// touches it after SubscribeEvents returns.
type follower struct {
	c    *Client
	sub  *nats.Subscription
	out  chan Event
	seen *idSet
	// last is where a read of the stream resumes: every event of the
	// caller at or below it was delivered (or came before the
	// subscription), except with a controld that sends no Prev.
	last uint64
	// floor is the stream's position at subscribe: events at or below it
	// came before the subscription.
	floor uint64
	// positioned is set once last is a stream position (0 for a stream
	// still empty at subscribe), so resuming reads from it, not the tail.
	positioned bool
	reconnects uint64
	dropped    int
	// checked is when the subscription last knew it had everything: an
	// event arrived in order, or a head check or read answered.
	checked  time.Time
	onRefill func(EventsRefill)
}

func (f *follower) run(ctx context.Context) {
	defer close(f.out)
	defer func() { _ = f.sub.Unsubscribe() }()
	// settleUntil, when set, ends the reads from the stream after a
	// reconnect (resumeSettle); lastResume is the last such read.
	var settleUntil, lastResume time.Time
	f.checked = time.Now()
	for {
		// Wake for the next head check on time, so that a lost last
		// event is noticed within EventsHeadPoll (and a round trip).
		wait := min(resumePoll, max(EventsHeadPoll-time.Since(f.checked), time.Millisecond))
		pctx, cancel := context.WithTimeout(ctx, wait)
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
				if !f.resume(ctx, RefillReconnect, nil) {
					return
				}
				if lastResume = time.Now(); lastResume.After(settleUntil) {
					settleUntil = time.Time{}
				}
			}
			continue
		}
		if m == nil {
			if time.Since(f.checked) >= EventsHeadPoll && !f.checkHead(ctx) {
				return
			}
			continue
		}
		var ev Event
		if json.Unmarshal(m.Data, &ev) != nil {
			continue
		}
		if f.positioned && ev.Prev > f.last {
			// The caller's event before this one never came: read
			// everything after the last one delivered, this one too (the
			// fan-out sends only what the stream holds), in order.
			if !f.resume(ctx, RefillChain, nil) {
				return
			}
			if ev.Seq <= f.last {
				continue // delivered by the read; this copy is a repeat
			}
		}
		if !f.send(ctx, ev) {
			return
		}
		f.checked = time.Now()
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
	// not order each other's messages. A later one arriving first reads
	// the earlier one back (its Prev was not delivered), and the earlier
	// one's live copy is then a repeat, told by id; with a controld that
	// sends no Prev only what the stream held before the subscription is
	// skipped by sequence, so the earlier one is still delivered, late.
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

// checkHead asks controld, once, whether the caller was sent events after
// the last one delivered, and delivers them if so. A failed call is
// retried at the next poll; false only when ctx ended.
func (f *follower) checkHead(ctx context.Context) bool {
	f.checked = time.Now()
	if !f.positioned {
		return true // no stream position to compare with (a controld without events.since)
	}
	cctx, cancel := context.WithTimeout(ctx, f.c.timeout)
	resp, err := f.c.EventsSince(cctx, EventsSinceRequest{After: f.last, Head: true})
	cancel()
	if err != nil {
		return ctx.Err() == nil
	}
	if len(resp.Events) == 0 && !resp.More && resp.Missed == 0 {
		return true
	}
	return f.resume(ctx, RefillHead, resp)
}

// resume delivers the caller's events after the last one delivered, read
// from the stream through controld (starting with first, an answer
// already read, if not nil), retrying until controld answers. It returns
// false when ctx ended or the connection closed for good.
func (f *follower) resume(ctx context.Context, cause string, first *EventsSinceResponse) bool {
	after, total := f.last, 0
	defer func() { f.report(cause, after, total) }()
	for {
		resp, err := first, error(nil)
		if first == nil {
			req := EventsSinceRequest{After: f.last, Tail: f.last == 0 && !f.positioned}
			resp, err = f.c.EventsSince(ctx, req)
		}
		first = nil
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
		f.positioned = true
		n, ok := f.deliver(ctx, resp)
		total += n
		if !ok {
			return false
		}
		if !resp.More {
			f.checked = time.Now()
			return true
		}
	}
}

// deliver sends one events.since answer's events (a gap first, for what
// the stream's retention dropped) and moves last to its end. n counts the
// events that had not been delivered yet.
func (f *follower) deliver(ctx context.Context, resp *EventsSinceResponse) (n int, ok bool) {
	if resp.Missed > 0 {
		gap, _ := json.Marshal(EventsGapData{After: f.last, First: resp.First, Missed: resp.Missed})
		if !f.send(ctx, Event{Kind: EventsGap, At: time.Now().UTC(), Seq: resp.First - 1, Data: gap}) {
			return n, false
		}
	}
	for _, ev := range resp.Events {
		if ev.Seq > f.floor && !f.seen.has(ev.ID) {
			n++
		}
		if !f.send(ctx, ev) {
			return n, false
		}
	}
	if resp.Next > f.last {
		f.last = resp.Next
	}
	return n, true
}

// report tells the OnRefill callback of events read back, if any.
func (f *follower) report(cause string, after uint64, n int) {
	if n > 0 && f.onRefill != nil {
		f.onRefill(EventsRefill{Cause: cause, After: after, Events: n})
	}
}

// ErrSessionEnded is behind the error of a subscription whose connection
// the server closed because the session ended: logged out, expired, or
// the account disabled.
var ErrSessionEnded = errors.New("session ended")

// SubscriptionEnded explains why a subscription's channel closed before
// its context ended: the session ended (an *Error wrapping
// ErrSessionEnded, hinting to log in again), or the connection closed.
func (c *Client) SubscriptionEnded() error {
	if err := c.nc.LastError(); err != nil && refusedSession(err) {
		return &Error{Code: CodeUnauthenticated,
			Message: "the server ended this connection: your session ended (logged out, expired, or the account was disabled)",
			Hint:    "run `gpuaas login`", cause: ErrSessionEnded}
	}
	return &Error{Code: CodeUnavailable, Message: "the event stream ended: the connection to the server closed"}
}

// refusedSession reports whether err is the server refusing the
// connection's credentials (not always wrapped by the client library).
func refusedSession(err error) bool {
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "authorization violation") || strings.Contains(msg, "authentication expired") ||
		strings.Contains(msg, "authentication revoked")
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

// has reports whether id is remembered.
func (s *idSet) has(id int64) bool {
	_, ok := s.ids[id]
	return ok
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
