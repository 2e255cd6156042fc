package controld

import (
	"strconv"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestRateLimitDefaults(t *testing.T) {
	var r RateLimit
	if err := r.CheckAndSetDefaults(); err != nil {
		t.Fatal(err)
	}
	if r.Rate != DefaultAPIRate || r.Burst != DefaultAPIBurst || r.Disabled {
		t.Fatalf("got %+v; want %v/s in bursts of %d", r, DefaultAPIRate, DefaultAPIBurst)
	}
	for _, bad := range []RateLimit{{Rate: -1}, {Burst: -1}} {
		if err := bad.CheckAndSetDefaults(); err == nil {
			t.Errorf("%+v: got no error; want one", bad)
		}
	}
}

// TestUserLimiterDefaults: with the defaults a user gets a burst of 200,
// then 50 requests a second; another user has a bucket of their own, and
// idle buckets are dropped.
func TestUserLimiterDefaults(t *testing.T) {
	var cfg RateLimit
	if err := cfg.CheckAndSetDefaults(); err != nil {
		t.Fatal(err)
	}
	clock := testutil.NewClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	l := newUserLimiter(cfg, clock.Now)
	for i := range DefaultAPIBurst {
		if _, ok := l.allow("u-ada"); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	wait, ok := l.allow("u-ada")
	if ok || wait != 20*time.Millisecond {
		t.Fatalf("request past the burst: got ok=%v wait=%v; want refused, retry in 20ms", ok, wait)
	}
	if _, ok := l.allow("u-bob"); !ok {
		t.Fatal("another user refused")
	}
	clock.Advance(time.Second)
	for i := range DefaultAPIRate {
		if _, ok := l.allow("u-ada"); !ok {
			t.Fatalf("request %d a second later refused; want %d let through", i+1, DefaultAPIRate)
		}
	}
	if _, ok := l.allow("u-ada"); ok {
		t.Fatal("request 51 a second later let through")
	}
	// Refilled buckets are dropped at the next sweep: a full new one is the same.
	clock.Advance(time.Hour)
	l.allow("u-carol")
	l.mu.Lock()
	n := len(l.buckets)
	l.mu.Unlock()
	if n != 1 {
		t.Fatalf("buckets after an idle hour: got %d; want only the new one", n)
	}
	if _, ok := newUserLimiter(RateLimit{Disabled: true}, clock.Now).allow("u-ada"); !ok {
		t.Fatal("a disabled limit refused")
	}
}

// BenchmarkUserLimiterAllow is the per-request cost of the per-user
// bucket, over 1000 users.
func BenchmarkUserLimiterAllow(b *testing.B) {
	l := newUserLimiter(RateLimit{Rate: 1e9, Burst: 1 << 30}, time.Now)
	users := make([]string, 1000)
	for i := range users {
		users[i] = "u-" + strconv.Itoa(i)
	}
	i := 0
	for b.Loop() {
		l.allow(users[i%len(users)])
		i++
	}
}
