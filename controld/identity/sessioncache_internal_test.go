package identity

import (
	"testing"
	"time"
)

// TestSessionCacheRules pins the cache's rules without a database: what
// may be stored, and what ends an entry.
func TestSessionCacheRules(t *testing.T) {
	now := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	p := &Principal{UserID: "u-1", SessionID: "s-1", Role: "user"}
	far := now.Add(time.Hour)
	fresh := func() *sessionCache {
		c := newSessionCache(5*time.Second, clock)
		c.setLive(true)
		return c
	}
	hit := func(c *sessionCache) bool {
		_, ok := c.get("tok")
		return ok
	}

	t.Run("stored and served", func(t *testing.T) {
		c := fresh()
		c.put(c.begin(), "tok", p, far)
		got, ok := c.get("tok")
		if !ok || *got != *p {
			t.Fatalf("got %+v, %v; want %+v", got, ok, p)
		}
	})
	t.Run("not while the listener is down", func(t *testing.T) {
		c := newSessionCache(5*time.Second, clock)
		c.put(c.begin(), "tok", p, far)
		if hit(c) {
			t.Fatal("cached with no listener")
		}
		c = fresh()
		c.put(c.begin(), "tok", p, far)
		c.setLive(false)
		if hit(c) {
			t.Fatal("served after the listener went down")
		}
	})
	t.Run("a check read before a revocation is not stored", func(t *testing.T) {
		c := fresh()
		epoch := c.begin()
		c.revoked("s-other") // any revocation while the check was reading
		c.put(epoch, "tok", p, far)
		if hit(c) {
			t.Fatal("stored a check that began before a revocation")
		}
	})
	t.Run("revoking: dropped, and kept out until committed", func(t *testing.T) {
		c := fresh()
		c.put(c.begin(), "tok", p, far)
		c.markRevoking([]string{"s-1"})
		if hit(c) {
			t.Fatal("served while being revoked")
		}
		c.put(c.begin(), "tok", p, far) // read before the revoking transaction committed
		if hit(c) {
			t.Fatal("stored a session being revoked")
		}
		c.revoked("s-1")
		c.put(c.begin(), "tok", p, far) // a rolled-back revocation: cached again
		if !hit(c) {
			t.Fatal("not cached after the revocation's notification")
		}
	})
	t.Run("notification drops it", func(t *testing.T) {
		c := fresh()
		c.put(c.begin(), "tok", p, far)
		c.revoked("s-1")
		if hit(c) {
			t.Fatal("served after its revocation")
		}
	})
	t.Run("TTL and expiry", func(t *testing.T) {
		c := fresh()
		c.put(c.begin(), "tok", p, far)
		now = now.Add(5 * time.Second)
		if hit(c) {
			t.Fatal("served past the TTL")
		}
		c.put(c.begin(), "tok", p, now.Add(time.Second))
		now = now.Add(time.Second)
		if hit(c) {
			t.Fatal("served past the session's expiry")
		}
	})
	t.Run("off with a negative TTL", func(t *testing.T) {
		c := newSessionCache(-1, clock)
		c.setLive(true)
		c.put(c.begin(), "tok", p, far)
		if hit(c) {
			t.Fatal("cached with the cache off")
		}
	})
}
