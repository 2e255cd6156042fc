package core

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// Activity and notices (idle release, docs/idle.md).
//
// The rule: an allocation is active while channel data moves, in either
// direction, on any of its sessions (shell, exec, sftp/scp) or port
// forwards (ssh -L and -R) through this gateway. (Agent forwarding's
// channels do not count: they only answer the node's signing requests.) SSH keep-alives — global requests
// (keepalive@openssh.com, what ServerAliveInterval sends) and channel
// requests (window changes, signals) — carry no channel data and are not
// activity: an open session that only keeps itself alive is idle.
//
// Counting is cheap: the relays check one atomic flag of the allocation
// per read or write and set it when it is clear (no allocation, no lock,
// no clock read, a store at most once per report); every
// ActivityReportInterval the flags set are swapped back and sent to
// controld in one gate.activity call as "active at the report's time",
// so the last activity is known to within one interval.
//
// Notices: controld's fan-out hands each alloc.notice event to
// gateproto.GateNoticeSubject; the gateway hands "gpuaas: <message>" to every
// Notifier registered for the allocation (the SSH front registers its
// open shell and exec sessions, which write it to stderr, never into an
// sftp/scp data stream), once per event id.
//
// The core knows sessions only as Notifiers and counts activity through
// a flag per allocation (Tracked): the fronts own their streams.

// Notifier is something a notice for an allocation can be told: an open
// shell or exec session of the SSH front. Notify must not block (a slow
// client must not hold the others back).
type Notifier interface {
	Notify(msg string)
}

// Tracked is one session, forward or stream of an allocation registered
// with the core (Track), until Close.
type Tracked struct {
	a     *activity
	alloc string
	n     Notifier
	e     *allocEntry
}

// Track registers a session, forward or stream of alloc for activity
// and, when n is not nil, for the allocation's notices. Close the result
// when it ends.
func (c *Core) Track(alloc string, n Notifier) *Tracked {
	return &Tracked{a: &c.activity, alloc: alloc, n: n, e: c.activity.open(alloc, n)}
}

// Flag is the allocation's activity flag, for relays that mark it on
// every read and write (Touch).
func (t *Tracked) Flag() *atomic.Bool { return &t.e.touched }

// Touch marks the allocation active now.
func (t *Tracked) Touch() { Touch(&t.e.touched) }

// Close ends the registration.
func (t *Tracked) Close() { t.a.close(t.alloc, t.n) }

// allocEntry is what the gateway tracks of one allocation.
type allocEntry struct {
	// touched is set by the relays when channel data moves.
	touched atomic.Bool

	// refs, sessions: protected by activity.mu.
	refs      int                   // open sessions and forwards
	notifiers map[Notifier]struct{} // shell and exec sessions, for notices
}

// activity indexes the allocations with open sessions or forwards.
type activity struct {
	// mu protects byAlloc and the entries' refs and sessions.
	mu      sync.Mutex
	byAlloc map[string]*allocEntry
	// pending is what the last report failed to send (reporter only).
	pending map[string]time.Time
	// seen remembers recent notice event ids (notices only).
	seenMu sync.Mutex
	seen   map[int64]struct{}
	order  []int64
}

// open registers a session or forward of alloc and returns its entry;
// n, when not nil, is a shell or exec session notices go to. close undoes
// it.
func (a *activity) open(alloc string, n Notifier) *allocEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byAlloc == nil {
		a.byAlloc = map[string]*allocEntry{}
	}
	e := a.byAlloc[alloc]
	if e == nil {
		e = &allocEntry{notifiers: map[Notifier]struct{}{}}
		a.byAlloc[alloc] = e
	}
	e.refs++
	if n != nil {
		e.notifiers[n] = struct{}{}
	}
	return e
}

func (a *activity) close(alloc string, n Notifier) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.byAlloc[alloc]
	if e == nil {
		return
	}
	e.refs--
	if n != nil {
		delete(e.notifiers, n)
	}
	// An entry touched since the last report stays until it is reported.
	if e.refs == 0 && !e.touched.Load() {
		delete(a.byAlloc, alloc)
	}
}

// collect swaps the touched flags back and returns the allocations that
// were touched, as active at now, with what the last report left unsent.
func (a *activity) collect(now time.Time) map[string]time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.pending
	a.pending = nil
	if out == nil {
		out = map[string]time.Time{}
	}
	for id, e := range a.byAlloc {
		if e.touched.Swap(false) {
			out[id] = now
		}
		if e.refs == 0 {
			delete(a.byAlloc, id)
		}
	}
	return out
}

// unsent keeps a report that failed for the next one (newer times win).
func (a *activity) unsent(m map[string]time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == nil {
		a.pending = map[string]time.Time{}
	}
	for id, t := range m {
		if t.After(a.pending[id]) {
			a.pending[id] = t
		}
	}
}

// notifiersOf returns what alloc's notices go to.
func (a *activity) notifiersOf(alloc string) []Notifier {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.byAlloc[alloc]
	if e == nil {
		return nil
	}
	out := make([]Notifier, 0, len(e.notifiers))
	for n := range e.notifiers {
		out = append(out, n)
	}
	return out
}

// seenNotices is how many notice ids the gateway remembers, to drop the
// repeats of at-least-once delivery.
const seenNotices = 1024

// firstTime reports whether the notice id is new, remembering it.
func (a *activity) firstTime(id int64) bool {
	a.seenMu.Lock()
	defer a.seenMu.Unlock()
	if a.seen == nil {
		a.seen = map[int64]struct{}{}
	}
	if _, ok := a.seen[id]; ok {
		return false
	}
	a.seen[id] = struct{}{}
	a.order = append(a.order, id)
	if len(a.order) > seenNotices {
		delete(a.seen, a.order[0])
		a.order = a.order[1:]
	}
	return true
}

// ReportActivity sends the activity seen every interval until ctx ends,
// and once more as it ends.
func (c *Core) ReportActivity(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// The last stretch, so a session that just ended counts.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			c.SendActivity(sctx)
			cancel()
			return
		case <-t.C:
		}
		c.SendActivity(ctx)
	}
}

// SendActivity reports the activity seen since the last report now (what
// ReportActivity does every interval).
func (c *Core) SendActivity(ctx context.Context) {
	m := c.activity.collect(c.cfg.Now().UTC())
	if len(m) == 0 {
		return
	}
	if _, err := gateproto.GateActivity(ctx, c.cfg.Client, gateproto.GateActivityRequest{LastActive: m}); err != nil {
		c.activity.unsent(m)
		if ctx.Err() == nil {
			c.log.Warn("report allocation activity; retrying at the next report", "allocations", len(m), "err", err)
		}
	}
}

// WatchNotices subscribes to controld's notices and hands each to the
// allocation's Notifiers; the subscription is in place when it returns.
func (c *Core) WatchNotices() (stop func(), err error) {
	nc := c.cfg.Client.Conn()
	sub, err := nc.Subscribe(gateproto.GateNoticeSubject, func(m *nats.Msg) {
		var ev api.Event
		var n api.AllocNotice
		if err := json.Unmarshal(m.Data, &ev); err != nil || ev.Kind != api.EventAllocNotice || json.Unmarshal(ev.Data, &n) != nil ||
			n.AllocationID == "" || n.Message == "" {
			c.log.Warn("undecodable notice", "err", err)
			return
		}
		if ev.ID != 0 && !c.activity.firstTime(ev.ID) {
			return
		}
		c.deliverNotice(n)
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", gateproto.GateNoticeSubject, err)
	}
	if err := nc.FlushTimeout(SubscribeTimeout); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe %s: %w", gateproto.GateNoticeSubject, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// deliverNotice hands a notice to the allocation's Notifiers.
func (c *Core) deliverNotice(n api.AllocNotice) {
	targets := c.activity.notifiersOf(n.AllocationID)
	if len(targets) == 0 {
		return
	}
	msg := "\r\ngpuaas: " + strings.ReplaceAll(strings.TrimSpace(n.Message), "\n", " ") + "\r\n"
	c.log.Info("notice to sessions", "allocation", n.AllocationID, "kind", n.Kind, "sessions", len(targets))
	for _, t := range targets {
		t.Notify(msg)
	}
}

// Touch marks an allocation active. A plain load first: the flag is set
// at most once per report, and a load costs no barrier on the hot path
// where an atomic store (an exchange on amd64) on every packet would.
func Touch(f *atomic.Bool) {
	if !f.Load() {
		f.Store(true)
	}
}
