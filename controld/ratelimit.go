package controld

import (
	"errors"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/gpuaas/gpuaas/internal/api"
)

// RateLimit is a token bucket per user for API calls: Rate requests per
// second on average, in bursts of up to Burst.
type RateLimit struct {
	Rate  float64
	Burst int
	// Disabled turns the limit off.
	Disabled bool
}

// Default per-user API limit: generous, so that only runaway scripts hit it.
const (
	DefaultAPIRate  = 50
	DefaultAPIBurst = 200
)

// Default limits of requests without a session: per connection, and per
// client address. A login takes one request, a CLI's start a few: a
// person never meets them; a flood of pre-login requests does.
const (
	DefaultPreLoginRate        = 5
	DefaultPreLoginBurst       = 20
	DefaultPreLoginSourceRate  = 20
	DefaultPreLoginSourceBurst = 60
)

// CheckAndSetDefaults fills defaults (the per-user API limit's).
func (r *RateLimit) CheckAndSetDefaults() error {
	return r.defaults(DefaultAPIRate, DefaultAPIBurst)
}

func (r *RateLimit) defaults(rate float64, burst int) error {
	if r.Rate == 0 {
		r.Rate = rate
	}
	if r.Burst == 0 {
		r.Burst = burst
	}
	if r.Rate < 0 || r.Burst < 1 {
		return errors.New("controld: API rate limit needs a positive rate and a burst of at least 1")
	}
	return nil
}

// userLimiter holds one token bucket per user. Buckets live in each
// replica's memory: with N replicas a user may get up to N times the
// rate, which is fine for a limit meant to stop runaway clients.
type userLimiter struct {
	cfg RateLimit
	now func() time.Time

	// mu protects the following.
	mu        sync.Mutex
	buckets   map[string]*rate.Limiter
	lastSweep time.Time
}

func newUserLimiter(cfg RateLimit, now func() time.Time) *userLimiter {
	return &userLimiter{cfg: cfg, now: now, buckets: map[string]*rate.Limiter{}}
}

// sweepEvery is how often full (idle) buckets are dropped.
const sweepEvery = time.Minute

// allow takes a token from user's bucket, or says how long until one is
// there.
func (l *userLimiter) allow(user string) (time.Duration, bool) {
	if l.cfg.Disabled {
		return 0, true
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > sweepEvery {
		for u, b := range l.buckets {
			if b.TokensAt(now) >= float64(l.cfg.Burst) {
				delete(l.buckets, u) // a new full bucket is the same
			}
		}
		l.lastSweep = now
	}
	b, ok := l.buckets[user]
	if !ok {
		b = rate.NewLimiter(rate.Limit(l.cfg.Rate), l.cfg.Burst)
		l.buckets[user] = b
	}
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// rateLimited is the answer to a user over their API rate.
func rateLimited(wait time.Duration) error {
	return api.RateLimited("too many requests: this account is over its API rate limit", wait)
}

// Refusals of requests without a session (Server.limit).
func preLoginConnLimited(wait time.Duration) error {
	return api.RateLimited("too many requests from this connection before logging in", wait)
}

func preLoginSourceLimited(wait time.Duration) error {
	return api.RateLimited("too many requests from your address before logging in", wait)
}
