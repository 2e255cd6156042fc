package identity

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// RevokedChannel is the Postgres NOTIFY channel Revoke and RevokeAll
// signal in the revoking transaction, one notification per session (the
// payload is its id). Postgres delivers it at commit to every replica's
// RunRevocations, which drops the session from its cache.
const RevokedChannel = "session_revoked"

// DefaultSessionCacheTTL bounds how long a replica trusts a session
// check without asking Postgres again, should a revocation's
// notification be lost while its listener still looks connected.
const DefaultSessionCacheTTL = 5 * time.Second

// revokingHold is how long a session marked by Revoking is kept out of
// the cache while its revocation's notification is awaited (a
// transaction that rolled back sends none; its session is then cached
// again after this).
const revokingHold = time.Minute

// sessionCache remembers successful session checks by raw token, so
// that a read costs no Postgres round trip for the session. It only
// caches while the revocation listener is LISTENing (live): a
// notification missed while it was not is covered by flushing everything
// when it (re)connects.
type sessionCache struct {
	ttl time.Duration
	now func() time.Time

	// mu protects the following.
	mu        sync.Mutex
	live      bool
	epoch     uint64 // bumped by every invalidation: fills begun before it are dropped
	nextSweep int    // size at which put sweeps expired entries
	byToken   map[string]cachedSession
	bySession map[string]map[string]struct{} // session id → raw tokens cached
	revoking  map[string]time.Time           // session id → until when it is not cached
}

type cachedSession struct {
	p     Principal
	until time.Time // fill time + TTL, never past the session's nor the token's expiry
}

func newSessionCache(ttl time.Duration, now func() time.Time) *sessionCache {
	return &sessionCache{ttl: ttl, now: now, nextSweep: minSweep, byToken: map[string]cachedSession{},
		bySession: map[string]map[string]struct{}{}, revoking: map[string]time.Time{}}
}

// get returns the cached principal of the raw token.
func (c *sessionCache) get(raw string) (*Principal, bool) {
	if c.ttl <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byToken[raw]
	if !ok || !c.live {
		return nil, false
	}
	if !c.now().Before(e.until) {
		c.dropLocked(e.p.SessionID)
		return nil, false
	}
	p := e.p
	return &p, true
}

// begin returns the epoch a fill must still see when it stores.
func (c *sessionCache) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// put caches p for the raw token, verified and checked against its
// session, unless anything was invalidated since begin returned epoch
// (the check's read may predate a revocation). expires is the earlier of
// the token's and the session's expiry.
func (c *sessionCache) put(epoch uint64, raw string, p *Principal, expires time.Time) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.live || c.epoch != epoch {
		return
	}
	if until, ok := c.revoking[p.SessionID]; ok {
		if now.Before(until) {
			return
		}
		delete(c.revoking, p.SessionID)
	}
	until := now.Add(c.ttl)
	if expires.Before(until) {
		until = expires
	}
	if len(c.byToken) >= c.nextSweep {
		c.sweepLocked(now)
	}
	c.byToken[raw] = cachedSession{p: *p, until: until}
	if c.bySession[p.SessionID] == nil {
		c.bySession[p.SessionID] = map[string]struct{}{}
	}
	c.bySession[p.SessionID][raw] = struct{}{}
}

// sweepLocked forgets expired entries, so that tokens used once do not
// pile up; it runs when the cache has doubled since the last sweep.
func (c *sessionCache) sweepLocked(now time.Time) {
	for raw, e := range c.byToken {
		if !now.Before(e.until) {
			c.dropLocked(e.p.SessionID)
			delete(c.byToken, raw)
		}
	}
	c.nextSweep = max(minSweep, 2*len(c.byToken))
}

// minSweep is the cache size below which it is never swept.
const minSweep = 1024

// dropLocked forgets a session's tokens; c.mu is held.
func (c *sessionCache) dropLocked(sessionID string) {
	for raw := range c.bySession[sessionID] {
		delete(c.byToken, raw)
	}
	delete(c.bySession, sessionID)
}

// markRevoking drops sessions whose revocation is being committed and keeps
// them out of the cache until their notification arrives.
func (c *sessionCache) markRevoking(sessionIDs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	until := c.now().Add(revokingHold)
	for _, id := range sessionIDs {
		c.dropLocked(id)
		c.revoking[id] = until
	}
}

// revoked handles a committed revocation's notification.
func (c *sessionCache) revoked(sessionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.dropLocked(sessionID)
	delete(c.revoking, sessionID)
}

// setLive turns caching on or off; either way everything cached is
// forgotten, since notifications may have been missed.
func (c *sessionCache) setLive(live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.live = live
	clear(c.byToken)
	clear(c.bySession)
	now := c.now()
	for id, until := range c.revoking {
		if !now.Before(until) {
			delete(c.revoking, id)
		}
	}
}

// Revoking tells this replica's session cache that the sessions are being
// revoked in a transaction not yet committed: they are dropped and not
// cached again until the revocation's notification arrives, so a request
// right after the commit is checked against Postgres. Other replicas learn
// of it from the notification (RunRevocations).
func (s *Service) Revoking(sessionIDs ...string) { s.cache.markRevoking(sessionIDs) }

// RunRevocations LISTENs for revocations on a connection of its own until
// ctx ends, dropping revoked sessions from the cache as their
// transactions commit. The cache serves nothing while this is not
// listening; it returns the connection's error, for a restart.
func (s *Service) RunRevocations(ctx context.Context, pool *pgxpool.Pool) error {
	if s.cache.ttl <= 0 {
		<-ctx.Done()
		return nil
	}
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("session revocations: %w", err)
	}
	// This connection only listens; it is ours, not the pool's.
	conn := pc.Hijack()
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	defer s.cache.setLive(false)
	if _, err := conn.Exec(ctx, "LISTEN "+RevokedChannel); err != nil {
		return fmt.Errorf("session revocations listen: %w", err)
	}
	s.cache.setLive(true)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("session revocations: %w", err)
		}
		s.cache.revoked(n.Payload)
	}
}
