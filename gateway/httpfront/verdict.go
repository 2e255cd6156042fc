package httpfront

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// verdictCache keeps controld's verdicts until their CacheUntil (at most
// gateproto.MaxHTTPVerdictCache): logout, a disabled account, a release or an
// expiry take effect within it, and at once for the requests of a login
// the core's revocation ends (dropSession).
type verdictCache struct {
	now func() time.Time
	// mu protects entries.
	mu      sync.Mutex
	entries map[[32]byte]*gateproto.GateAuthorizeHTTPResponse
}

func newVerdictCache(now func() time.Time) *verdictCache {
	return &verdictCache{now: now, entries: map[[32]byte]*gateproto.GateAuthorizeHTTPResponse{}}
}

// key hashes the exposure and the credential: no bearer is kept as is.
func (rq *request) key() [32]byte {
	return sha256.Sum256([]byte(rq.label + "\x00" + rq.cred.bearer + "\x00" + rq.cred.sessionID + "\x00" + rq.cred.userID))
}

func (c *verdictCache) get(k [32]byte) *gateproto.GateAuthorizeHTTPResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.entries[k]
	if v != nil && !c.now().Before(v.CacheUntil) {
		delete(c.entries, k)
		return nil
	}
	return v
}

func (c *verdictCache) put(k [32]byte, v *gateproto.GateAuthorizeHTTPResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.entries) > 10000 { // sweep what expired before growing further
		for k, e := range c.entries {
			if !now.Before(e.CacheUntil) {
				delete(c.entries, k)
			}
		}
	}
	if max := now.Add(gateproto.MaxHTTPVerdictCache); v.CacheUntil.After(max) {
		v.CacheUntil = max
	}
	c.entries[k] = v
}

// dropSession forgets the verdicts given to a login.
func (c *verdictCache) dropSession(sessionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.entries {
		if v.SessionID == sessionID {
			delete(c.entries, k)
		}
	}
}

// verdict is controld's verdict on rq, from the cache when fresh.
func (s *Server) verdict(ctx context.Context, rq *request) (*gateproto.GateAuthorizeHTTPResponse, error) {
	k := rq.key()
	if v := s.verdicts.get(k); v != nil {
		return v, nil
	}
	v, err := s.cfg.Verdicts.GateAuthorizeHTTP(ctx, gateproto.GateAuthorizeHTTPRequest{Host: rq.label,
		Bearer: rq.cred.bearer, SessionID: rq.cred.sessionID, UserID: rq.cred.userID})
	if err != nil {
		return nil, err
	}
	s.verdicts.put(k, v)
	return v, nil
}
