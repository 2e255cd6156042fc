package core

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshlink"
)

// Pooled links (docs/expose.md "Links", docs/decisions/0032-pooled-port-links.md).
//
// OpenPort's streams are channels of a few links per allocation rather
// than one link each. The pool saves the TCP and SSH (or TLS) handshake,
// never the decision:
//
//   - every stream is decided by controld first (gate.authorize or
//     gate.authorize_http, with a fresh ticket), as without the pool;
//   - a link is reused only for the same allocation, node, terminal
//     address and host key, POSIX user and login that controld just
//     answered for (linkKey): one login's link never carries another's
//     streams;
//   - no new channel opens on a link past its ticket's expiry or
//     LinkLimits.MaxAge, whichever is first (channels already open go on,
//     as a stream outlived its ticket before);
//   - a link is registered as its login's connection (AddLogin): when the
//     login ends, the link is closed and every stream on it ends with it;
//   - a link with no channels is closed after LinkLimits.Idle; channels
//     per link and links per allocation are bounded.

// linkKey is what a pooled link may carry streams for: the allocation,
// where and as whom its node was reached, and the login controld allowed.
type linkKey struct {
	alloc, node, addr, hostKey, posixUser string
	login                                 gateproto.GateSession
}

func keyOf(d *decision) linkKey {
	a := d.auth
	return linkKey{alloc: a.AllocationID, node: a.NodeID, addr: a.TerminalAddr, hostKey: a.TerminalHostKey,
		posixUser: a.PosixUser, login: d.login}
}

// linkPool holds the links OpenPort's streams share.
type linkPool struct {
	// mu protects the following and the pooledLinks' chans, idle, dead.
	mu       sync.Mutex
	limits   *LinkLimits
	byKey    map[linkKey][]*pooledLink
	perAlloc map[string]int // links open or being dialled
	dialing  map[linkKey]chan struct{}

	dialled atomic.Int64
}

// pooledLink is one link of the pool.
type pooledLink struct {
	p           *linkPool
	key         linkKey
	conn        gossh.Conn
	limits      LinkLimits
	usableUntil time.Time // no new channels from then on

	// protected by p.mu
	removeLogin func() // set once, as the link is pooled
	chans       int
	idle        *time.Timer
	dead        bool // retired: out of byKey, closed or about to be
	removed     bool // shut ran: the login registration removed (or to be)
}

func (p *linkPool) limitsLocked() LinkLimits {
	if p.limits == nil {
		p.limits = &LinkLimits{}
		p.limits.setDefaults()
	}
	return *p.limits
}

// acquireLink returns a link for d's key with a channel reserved on it: a
// pooled one still usable at now, or one dialled with d's ticket (fresh).
// Release the channel with release.
func (c *Core) acquireLink(ctx context.Context, g Grant, d *decision) (pl *pooledLink, fresh bool, err error) {
	p := &c.links
	key := keyOf(d)
	for {
		now := c.cfg.Now()
		p.mu.Lock()
		lim := p.limitsLocked()
		var spent []*pooledLink // too old for new channels, and idle
		var found *pooledLink
		for _, l := range p.byKey[key] {
			switch {
			case l.dead:
			case !now.Before(l.usableUntil):
				if l.chans == 0 {
					spent = append(spent, l)
				}
			case found == nil && l.chans < l.limits.ChannelsPerLink:
				found = l
			}
		}
		for _, l := range spent {
			p.retireLocked(l)
		}
		if found != nil {
			found.chans++
			if found.idle != nil {
				found.idle.Stop()
				found.idle = nil
			}
		}
		if found != nil || len(spent) > 0 {
			p.mu.Unlock()
			for _, l := range spent {
				l.shut()
			}
			if found != nil {
				return found, false, nil
			}
			continue
		}
		if wait, ok := p.dialing[key]; ok {
			// Another stream of the same login is dialling: share its link.
			p.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, false, fmt.Errorf("open %s: %w", key.alloc, ctx.Err())
			}
		}
		if p.perAlloc[key.alloc] >= lim.LinksPerAllocation {
			p.mu.Unlock()
			return nil, false, fmt.Errorf("open %s: %w (%d links of %d streams)", key.alloc, ErrTooManyStreams,
				lim.LinksPerAllocation, lim.ChannelsPerLink)
		}
		wait := make(chan struct{})
		if p.dialing == nil {
			p.dialing, p.perAlloc, p.byKey = map[linkKey]chan struct{}{}, map[string]int{}, map[linkKey][]*pooledLink{}
		}
		p.dialing[key] = wait
		p.perAlloc[key.alloc]++
		p.mu.Unlock()

		link, err := c.dialNode(ctx, g, d)
		if err == nil {
			pl = c.poolLink(link, key, d, lim, now)
		}
		p.mu.Lock()
		delete(p.dialing, key)
		close(wait)
		if err != nil {
			p.perAlloc[key.alloc]--
			p.mu.Unlock()
			return nil, false, err
		}
		if pl.dead {
			// Its login ended, or the node closed it, before it was
			// pooled: retired already, never to be shared.
			p.mu.Unlock()
			pl.shut()
			return nil, false, fmt.Errorf("open %s: the link to node %s ended as it opened", key.alloc, key.node)
		}
		p.byKey[key] = append(p.byKey[key], pl)
		p.mu.Unlock()
		return pl, true, nil
	}
}

// poolLink makes link a pooled link with one channel reserved: what the
// node opens or asks on it is refused, its login's end closes it, and its
// end (the node closed it) takes it out of the pool.
func (c *Core) poolLink(link *Link, key linkKey, d *decision, lim LinkLimits, now time.Time) *pooledLink {
	p := &c.links
	p.dialled.Add(1)
	until := now.Add(lim.MaxAge)
	if vb := time.Unix(int64(d.ticket.ValidBefore), 0); d.ticket.ValidBefore != gossh.CertTimeInfinity && vb.Before(until) {
		until = vb
	}
	pl := &pooledLink{p: p, key: key, conn: link.Conn, limits: lim, usableUntil: until, chans: 1}
	go sshlink.DiscardRequests(link.Reqs)
	go func() {
		for nc := range link.Chans {
			_ = nc.Reject(gossh.Prohibited, "no channels towards an HTTPS stream")
		}
	}()
	if key.login.SessionID != "" {
		remove := c.AddLogin(pl)
		p.mu.Lock()
		pl.removeLogin = remove
		shut := pl.removed // its login ended already
		p.mu.Unlock()
		if shut {
			remove()
		}
	}
	go func() {
		_ = link.Conn.Wait()
		p.mu.Lock()
		p.retireLocked(pl)
		p.mu.Unlock()
		pl.shut()
	}()
	return pl
}

// release gives back a channel of pl; a link left with none is closed
// when it can take no more (dead, too old), or after Idle.
func (p *linkPool) release(pl *pooledLink, now time.Time) {
	p.mu.Lock()
	pl.chans--
	if pl.chans > 0 || pl.dead {
		p.mu.Unlock()
		return
	}
	if !now.Before(pl.usableUntil) {
		p.retireLocked(pl)
		p.mu.Unlock()
		pl.shut()
		return
	}
	var t *time.Timer
	t = time.AfterFunc(pl.limits.Idle, func() {
		p.mu.Lock()
		if pl.idle != t || pl.chans > 0 {
			p.mu.Unlock()
			return
		}
		p.retireLocked(pl)
		p.mu.Unlock()
		pl.shut()
	})
	pl.idle = t
	p.mu.Unlock()
}

// kill retires pl at once: its streams end.
func (p *linkPool) kill(pl *pooledLink) {
	p.mu.Lock()
	p.retireLocked(pl)
	p.mu.Unlock()
	pl.shut()
}

// retireLocked takes pl out of the pool (once): no stream will be
// opened on it again. The caller closes it with shut, outside the lock.
func (p *linkPool) retireLocked(pl *pooledLink) {
	if pl.dead {
		return
	}
	pl.dead = true
	if pl.idle != nil {
		pl.idle.Stop()
		pl.idle = nil
	}
	ls := p.byKey[pl.key]
	for i, l := range ls {
		if l == pl {
			ls = append(ls[:i:i], ls[i+1:]...)
			break
		}
	}
	if len(ls) == 0 {
		delete(p.byKey, pl.key)
	} else {
		p.byKey[pl.key] = ls
	}
	if p.perAlloc[pl.key.alloc]--; p.perAlloc[pl.key.alloc] <= 0 {
		delete(p.perAlloc, pl.key.alloc)
	}
}

// shut closes a retired link and unregisters its login.
func (pl *pooledLink) shut() {
	_ = pl.conn.Close()
	pl.p.mu.Lock()
	remove := !pl.removed && pl.removeLogin != nil
	pl.removed = true
	pl.p.mu.Unlock()
	if remove {
		pl.removeLogin()
	}
}

// Ref is the login the link was dialled for (Login).
func (pl *pooledLink) Ref() gateproto.GateSession { return pl.key.login }

// End closes the link because its login ended: every stream on it ends
// (Login).
func (pl *pooledLink) End(string) { go pl.p.kill(pl) }

// certLogin is the login a certificate grant names: its user and the
// session its certificate carries (none for a certificate without one).
func certLogin(g Grant) gateproto.GateSession {
	login := gateproto.GateSession{UserID: g.UserID}
	pub, _, _, _, err := gossh.ParseAuthorizedKey([]byte(g.Certificate))
	if err != nil {
		return login
	}
	if cert, ok := pub.(*gossh.Certificate); ok {
		login.SessionID = cert.Permissions.Extensions[sshcert.ExtensionSessionID]
	}
	return login
}
