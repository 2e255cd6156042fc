package identity_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func openPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), testutil.Postgres(t, pgTemplate))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

var testLimits = identity.LoginLimits{
	Account:  identity.Limit{MaxFailures: 3, Lockout: time.Minute, MaxLockout: 10 * time.Minute, Window: time.Hour},
	Source:   identity.Limit{MaxFailures: 5, Lockout: time.Minute, MaxLockout: 10 * time.Minute, Window: time.Hour},
	Slowdown: identity.Slowdown{Failures: 6, Window: time.Hour},
}

// wantLimited checks that err is rate_limited with retry-after secs.
func wantLimited(t *testing.T, err error, secs int) {
	t.Helper()
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeRateLimited {
		t.Fatalf("got %v; want rate_limited", err)
	}
	if e.RetryAfterSeconds != secs {
		t.Fatalf("got retry after %ds; want %ds", e.RetryAfterSeconds, secs)
	}
}

func TestLimiterPerSource(t *testing.T) {
	t.Parallel()
	pool := openPool(t)
	ctx := t.Context()
	clock := testutil.NewClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	l := identity.NewLimiter(testLimits, clock.Now)
	const attacker, neighbour = "203.0.113.7:40000", "198.51.100.1:50000"

	// Five tries from the attacker's address, each at another account
	// (so that no account budget is involved), fail.
	for i := range 5 {
		if _, err := l.Begin(ctx, pool, "", attacker); err != nil {
			t.Fatalf("attempt %d: got %v; want it let through", i+1, err)
		}
	}
	_, err := l.Begin(ctx, pool, "", attacker)
	wantLimited(t, err, 60)
	clock.Advance(20 * time.Second)
	_, err = l.Begin(ctx, pool, "victim@example.test", attacker)
	wantLimited(t, err, 40)
	// The locked source's refusals did not count against the account.
	if n, err := identity.Failures(ctx, pool, identity.AccountKey("victim@example.test")); err != nil || n != 0 {
		t.Fatalf("victim's failures: got %d, %v; want 0", n, err)
	}
	// Another address is not affected.
	if _, err := l.Begin(ctx, pool, "", neighbour); err != nil {
		t.Fatalf("the neighbour: got %v; want it let through", err)
	}
	// Once the lockout is over, one try; when it fails, twice as long.
	clock.Advance(40 * time.Second)
	if _, err := l.Begin(ctx, pool, "", attacker); err != nil {
		t.Fatalf("after the lockout: got %v; want one try let through", err)
	}
	_, err = l.Begin(ctx, pool, "", attacker)
	wantLimited(t, err, 120)

	// An empty source is not limited at all.
	for i := range 20 {
		if _, err := l.Begin(ctx, pool, "", ""); err != nil {
			t.Fatalf("attempt %d without a source: got %v; want it let through", i+1, err)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM login_attempts WHERE key = 'source:'`); n != 0 {
		t.Fatalf("rows for the empty source: got %d; want none", n)
	}
}

func TestLimiterSuccess(t *testing.T) {
	t.Parallel()
	pool := openPool(t)
	ctx := t.Context()
	clock := testutil.NewClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	l := identity.NewLimiter(testLimits, clock.Now)
	const src = "192.0.2.10:1234"
	for range 2 {
		if _, err := l.Begin(ctx, pool, "ada@example.test", src); err != nil {
			t.Fatal(err)
		}
	}
	a, err := l.Begin(ctx, pool, "ADA@example.test", src)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Succeeded(ctx, pool); err != nil {
		t.Fatal(err)
	}
	// The client starts afresh at the account; the account's and the
	// source's counts only got this attempt back.
	for key, want := range map[string]int{identity.ClientKey("ada@example.test", src): 0,
		identity.AccountKey("ada@example.test"): 2, identity.SourceKey(src): 2} {
		if n, err := identity.Failures(ctx, pool, key); err != nil || n != want {
			t.Errorf("%s: got %d failures, %v; want %d", key, n, err, want)
		}
	}
	// Failures older than the window are forgotten.
	for range 3 {
		if _, err := l.Begin(ctx, pool, "bob@example.test", ""); err != nil {
			t.Fatal(err)
		}
	}
	_, err = l.Begin(ctx, pool, "bob@example.test", "")
	wantLimited(t, err, 60)
	clock.Advance(time.Hour + time.Second)
	for i := range 3 {
		if _, err := l.Begin(ctx, pool, "bob@example.test", ""); err != nil {
			t.Fatalf("attempt %d after the window: got %v; want it let through", i+1, err)
		}
	}
}

// Concurrent guesses cannot overtake the limit: every attempt is counted
// before the password is checked.
func TestLimiterConcurrentAttempts(t *testing.T) {
	t.Parallel()
	pool := openPool(t)
	l := identity.NewLimiter(testLimits, func() time.Time { return time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC) })
	const n = 12
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = l.Begin(context.Background(), pool, "carol@example.test", "") })
	}
	wg.Wait()
	let := 0
	for _, err := range errs {
		switch {
		case err == nil:
			let++
		case !errors.Is(err, api.ErrRateLimited):
			t.Errorf("got %v; want nil or rate_limited", err)
		}
	}
	if let != testLimits.Account.MaxFailures {
		t.Fatalf("%d concurrent attempts: %d let through; want %d", n, let, testLimits.Account.MaxFailures)
	}
}

func count(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}
