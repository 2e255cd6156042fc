package busauth

import (
	"sync"
	"time"
)

// sourceLimiter is a token bucket per source address, bounding how fast
// one address may open connections without a login (each is a chance to
// guess a password). It is per replica; the per-account login limit in
// Postgres is the one replicas share.
type sourceLimiter struct {
	rate  float64 // tokens per second
	burst float64

	// mu protects buckets.
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// maxSources bounds the map: past it, full buckets are forgotten.
const maxSources = 100_000

func newSourceLimiter(rate float64, burst int) *sourceLimiter {
	return &sourceLimiter{rate: rate, burst: float64(burst), buckets: map[string]*bucket{}}
}

// allow takes a token from src's bucket if it has one.
func (l *sourceLimiter) allow(src string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[src]
	if b == nil {
		if len(l.buckets) >= maxSources {
			l.forgetFull(now)
		}
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[src] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func (l *sourceLimiter) forgetFull(now time.Time) {
	for src, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*l.rate >= l.burst {
			delete(l.buckets, src)
		}
	}
}
