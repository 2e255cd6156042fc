package httpfront

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiters bound requests a second per exposure and per client address
// (token buckets); buckets unused for a minute are dropped.
type limiters struct {
	perExposure, perSource rate.Limit
	burst                  int
	now                    func() time.Time
	// mu protects the following.
	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	l    *rate.Limiter
	used time.Time
}

func newLimiters(perExposure, perSource rate.Limit, burst int, now func() time.Time) *limiters {
	return &limiters{perExposure: perExposure, perSource: perSource, burst: burst, now: now, buckets: map[string]*bucket{}}
}

// allow takes a token from the exposure's bucket and the source's; false
// when either is empty.
func (l *limiters) allow(label, source string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.lastSweep) > time.Minute {
		for k, b := range l.buckets {
			if now.Sub(b.used) > time.Minute {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	e, s := l.get("e:"+label, l.perExposure, now), l.get("s:"+source, l.perSource, now)
	if !s.AllowN(now, 1) {
		return false
	}
	return e.AllowN(now, 1)
}

func (l *limiters) get(key string, r rate.Limit, now time.Time) *rate.Limiter {
	b := l.buckets[key]
	if b == nil {
		b = &bucket{l: rate.NewLimiter(r, l.burst)}
		l.buckets[key] = b
	}
	b.used = now
	return b.l
}
