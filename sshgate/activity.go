package sshgate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/ssh"
	"github.com/nats-io/nats.go"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
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
// api.GateNoticeSubject; the gateway writes "gpuaas: <message>" to the
// stderr of every open shell and exec session of the allocation (never
// into an sftp/scp data stream), once per event id.

// allocEntry is what the gateway tracks of one allocation.
type allocEntry struct {
	// touched is set by the relays when channel data moves.
	touched atomic.Bool

	// refs, sessions: protected by activity.mu.
	refs     int                        // open sessions and forwards
	sessions map[ssh.Session]*loginConn // shell and exec sessions, for notices
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
// s, when not nil, is a shell or exec session notices go to. close undoes
// it.
func (a *activity) open(alloc string, s ssh.Session, lc *loginConn) *allocEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byAlloc == nil {
		a.byAlloc = map[string]*allocEntry{}
	}
	e := a.byAlloc[alloc]
	if e == nil {
		e = &allocEntry{sessions: map[ssh.Session]*loginConn{}}
		a.byAlloc[alloc] = e
	}
	e.refs++
	if s != nil {
		e.sessions[s] = lc
	}
	return e
}

func (a *activity) close(alloc string, s ssh.Session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.byAlloc[alloc]
	if e == nil {
		return
	}
	e.refs--
	if s != nil {
		delete(e.sessions, s)
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

// sessionsOf returns alloc's open shell and exec sessions.
func (a *activity) sessionsOf(alloc string) map[ssh.Session]*loginConn {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.byAlloc[alloc]
	if e == nil {
		return nil
	}
	out := make(map[ssh.Session]*loginConn, len(e.sessions))
	for s, lc := range e.sessions {
		out[s] = lc
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

// reportActivity sends the activity seen each ActivityReportInterval
// until ctx ends, and once more as it ends.
func (g *Gateway) reportActivity(ctx context.Context) {
	t := time.NewTicker(g.cfg.ActivityReportInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// The last stretch, so a session that just ended counts.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			g.sendActivity(sctx)
			cancel()
			return
		case <-t.C:
		}
		g.sendActivity(ctx)
	}
}

func (g *Gateway) sendActivity(ctx context.Context) {
	m := g.activity.collect(g.cfg.Now().UTC())
	if len(m) == 0 {
		return
	}
	if _, err := g.cfg.Client.GateActivity(ctx, api.GateActivityRequest{LastActive: m}); err != nil {
		g.activity.unsent(m)
		if ctx.Err() == nil {
			g.log.Warn("report allocation activity; retrying at the next report", "allocations", len(m), "err", err)
		}
	}
}

// watchNotices subscribes to controld's notices; the subscription is in
// place when it returns.
func (g *Gateway) watchNotices() (stop func(), err error) {
	nc := g.cfg.Client.Conn()
	sub, err := nc.Subscribe(api.GateNoticeSubject, func(m *nats.Msg) {
		var ev api.Event
		var n api.AllocNotice
		if err := json.Unmarshal(m.Data, &ev); err != nil || ev.Kind != api.EventAllocNotice || json.Unmarshal(ev.Data, &n) != nil ||
			n.AllocationID == "" || n.Message == "" {
			g.log.Warn("undecodable notice", "err", err)
			return
		}
		if ev.ID != 0 && !g.activity.firstTime(ev.ID) {
			return
		}
		g.deliverNotice(n)
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", api.GateNoticeSubject, err)
	}
	if err := nc.FlushTimeout(subscribeTimeout); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe %s: %w", api.GateNoticeSubject, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// deliverNotice writes a notice to the stderr of the allocation's open
// shell and exec sessions, without waiting for slow clients.
func (g *Gateway) deliverNotice(n api.AllocNotice) {
	sessions := g.activity.sessionsOf(n.AllocationID)
	if len(sessions) == 0 {
		return
	}
	msg := "\r\ngpuaas: " + strings.ReplaceAll(strings.TrimSpace(n.Message), "\n", " ") + "\r\n"
	g.log.Info("notice to sessions", "allocation", n.AllocationID, "kind", n.Kind, "sessions", len(sessions))
	for s, lc := range sessions {
		g.bg.add()
		go func() {
			defer g.bg.done()
			write := func() { _, _ = io.WriteString(s.Stderr(), msg) }
			if lc != nil {
				lc.endWrite(s, write)
			} else {
				write()
			}
		}()
	}
}

// touch marks an allocation active. A plain load first: the flag is set
// at most once per report, and a load costs no barrier on the hot path
// where an atomic store (an exchange on amd64) on every packet would.
func touch(f *atomic.Bool) {
	if !f.Load() {
		f.Store(true)
	}
}

// touchingChannel marks its allocation active on every read and write of
// channel data (port forwards, local and remote).
type touchingChannel struct {
	gossh.Channel
	touched *atomic.Bool
}

func (c touchingChannel) Read(p []byte) (int, error) {
	n, err := c.Channel.Read(p)
	if n > 0 {
		touch(c.touched)
	}
	return n, err
}

func (c touchingChannel) Write(p []byte) (int, error) {
	n, err := c.Channel.Write(p)
	if n > 0 {
		touch(c.touched)
	}
	return n, err
}
