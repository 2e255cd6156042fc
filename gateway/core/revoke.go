package core

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// Revocation. A user's credential names the login session it was minted
// under (for SSH, sshcert.ExtensionSessionID); when that session ends —
// logout, an administrator disabling the user, expiry — the front's open
// connections under it end:
//
//   - the fronts register each authenticated connection as a Login
//     (AddLogin) until it ends;
//   - controld announces revocations on gateproto.GateRevokedSubject, and every
//     registered Login of a revoked session is told to End within moments;
//   - a missed announcement (the gateway was reconnecting to NATS) and
//     expiry, which is never announced, are caught by a batched re-check
//     of every open login every interval and right after a NATS reconnect.
//
// An announcement is only a hint: the core ends what controld confirms
// has ended (gate.sessions), so a forged message cannot cut anyone off.

// reconnectPoll is how often the NATS connection is looked at for a
// reconnect, after which every open login is re-checked at once.
const reconnectPoll = time.Second

// Login is one authenticated connection of a front, as revocation sees it.
type Login interface {
	// Ref is the login session and the user the connection's credential
	// names.
	Ref() gateproto.GateSession
	// End ends the connection because its login ended (reason: one of
	// api.SessionEnded*), telling what it serves why. It must not block:
	// the core calls it from its revocation loop.
	End(reason string)
}

// logins indexes the open connections by login session.
type logins struct {
	// mu protects bySession.
	mu        sync.Mutex
	bySession map[string]map[Login]struct{}
}

// AddLogin registers an authenticated connection until remove is called
// (when the connection ends).
func (c *Core) AddLogin(l Login) (remove func()) {
	ref := l.Ref()
	c.logins.mu.Lock()
	if c.logins.bySession == nil {
		c.logins.bySession = map[string]map[Login]struct{}{}
	}
	set := c.logins.bySession[ref.SessionID]
	if set == nil {
		set = map[Login]struct{}{}
		c.logins.bySession[ref.SessionID] = set
	}
	set[l] = struct{}{}
	c.logins.mu.Unlock()
	return func() {
		c.logins.mu.Lock()
		defer c.logins.mu.Unlock()
		set := c.logins.bySession[ref.SessionID]
		delete(set, l)
		if len(set) == 0 {
			delete(c.logins.bySession, ref.SessionID)
		}
	}
}

// LoginRefs returns the distinct (session, user) pairs of the open
// connections, only those of sessionIDs when it is not nil.
func (c *Core) LoginRefs(sessionIDs []string) []gateproto.GateSession {
	l := &c.logins
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []gateproto.GateSession
	seen := map[gateproto.GateSession]bool{}
	collect := func(set map[Login]struct{}) {
		for lc := range set {
			ref := lc.Ref()
			if !seen[ref] {
				seen[ref] = true
				out = append(out, ref)
			}
		}
	}
	if sessionIDs == nil {
		for _, set := range l.bySession {
			collect(set)
		}
		return out
	}
	for _, sid := range sessionIDs {
		collect(l.bySession[sid])
	}
	return out
}

// Logins returns every open connection.
func (c *Core) Logins() []Login {
	l := &c.logins
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Login
	for _, set := range l.bySession {
		for lc := range set {
			out = append(out, lc)
		}
	}
	return out
}

// matching returns the open connections of a session and user.
func (c *Core) matching(ref gateproto.GateSession) []Login {
	l := &c.logins
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Login
	for lc := range l.bySession[ref.SessionID] {
		if lc.Ref().UserID == ref.UserID {
			out = append(out, lc)
		}
	}
	return out
}

// LoginEnded asks controld whether the login ref names has ended: the
// reason when it has, "" while it is live.
func (c *Core) LoginEnded(ctx context.Context, ref gateproto.GateSession) (string, error) {
	resp, err := gateproto.GateSessions(ctx, c.cfg.Client, gateproto.GateSessionsRequest{Sessions: []gateproto.GateSession{ref}})
	if err != nil {
		return "", fmt.Errorf("check login %s: %w", ref.SessionID, err)
	}
	if len(resp.Ended) > 0 {
		return resp.Ended[0].Reason, nil
	}
	return "", nil
}

// WatchRevocations subscribes to controld's revocation announcements and
// re-checks the open logins every interval until ctx ends. The
// subscription is in place when it returns.
func (c *Core) WatchRevocations(ctx context.Context, interval time.Duration) (stop func(), err error) {
	nc := c.cfg.Client.Conn()
	hints := make(chan []string, 64)
	sub, err := nc.Subscribe(gateproto.GateRevokedSubject, func(m *nats.Msg) {
		var r api.SessionRevoked
		if err := json.Unmarshal(m.Data, &r); err != nil || len(r.SessionIDs) == 0 {
			c.log.Warn("undecodable revocation announcement", "err", err)
			return
		}
		select {
		case hints <- r.SessionIDs:
		default:
			// The loop is behind: a full re-check covers everything.
			select {
			case hints <- nil:
			default:
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", gateproto.GateRevokedSubject, err)
	}
	if err := nc.FlushTimeout(SubscribeTimeout); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe %s: %w", gateproto.GateRevokedSubject, err)
	}
	loopCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.revocationLoop(loopCtx, nc, hints, interval)
	}()
	return func() {
		_ = sub.Unsubscribe()
		cancel()
		<-done
	}, nil
}

// revocationLoop checks the logins an announcement names as it arrives,
// and every open login each interval and after a NATS reconnect
// (announcements sent while disconnected are lost).
func (c *Core) revocationLoop(ctx context.Context, nc *nats.Conn, hints <-chan []string, interval time.Duration) {
	every := time.NewTicker(interval)
	defer every.Stop()
	poll := time.NewTicker(reconnectPoll)
	defer poll.Stop()
	reconnects := nc.Stats().Reconnects
	for {
		var only []string // nil: every open login
		select {
		case <-ctx.Done():
			return
		case only = <-hints:
		case <-every.C:
		case <-poll.C:
			n := nc.Stats().Reconnects
			if n == reconnects {
				continue
			}
			reconnects = n
			c.log.Info("reconnected to NATS; re-checking open logins")
		}
		c.checkLogins(ctx, only)
	}
}

// checkLogins asks controld about the open logins (those of sessionIDs,
// or all when nil), in batches, and ends the connections of those that
// ended.
func (c *Core) checkLogins(ctx context.Context, sessionIDs []string) {
	refs := c.LoginRefs(sessionIDs)
	for len(refs) > 0 {
		batch := refs[:min(len(refs), gateproto.MaxGateSessions)]
		refs = refs[len(batch):]
		resp, err := gateproto.GateSessions(ctx, c.cfg.Client, gateproto.GateSessionsRequest{Sessions: batch})
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("check open logins; retrying at the next check", "logins", len(batch), "err", err)
			}
			return
		}
		for _, e := range resp.Ended {
			for _, l := range c.matching(e.GateSession) {
				l.End(e.Reason)
			}
		}
	}
}
