package controld_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// wantRateLimited checks that err is rate_limited with a retry-after
// between 1 and maxSecs, said in the hint too.
func wantRateLimited(t *testing.T, err error, maxSecs int) *api.Error {
	t.Helper()
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodeRateLimited {
		t.Fatalf("got %v; want rate_limited", err)
	}
	if e.RetryAfterSeconds < 1 || e.RetryAfterSeconds > maxSecs || !strings.Contains(e.Hint, "retry in") {
		t.Fatalf("got retry after %ds, hint %q; want 1..%ds and a hint saying when", e.RetryAfterSeconds, e.Hint, maxSecs)
	}
	return e
}

// TestLoginLockout is the acceptance test of login protection: 20 wrong
// passwords in a row end in rate_limited, each failure is audited, the
// right password works once the lockout is over, and a success resets
// the count.
func TestLoginLockout(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Now())
	// The address's own budget is set out of the way: this is the
	// account's lockout (TestLoginLimitPerSource is the address's).
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, Now: clock.Now,
		LoginLimits: identity.LoginLimits{Source: identity.Limit{MaxFailures: 1000, Lockout: time.Minute}}})
	ctx := t.Context()
	anon := env.AnonClient()
	bob, _ := env.AddUser(t, "bob@example.test", api.RoleUser)
	const pw = "another good password"
	sessions := count(t, env, `SELECT count(*) FROM sessions`)
	maxFailures := identity.DefaultAccountLimit.MaxFailures

	for i := 1; i <= 20; i++ {
		_, err := anon.Login(ctx, api.LoginRequest{Email: bob.Email, Password: "wrong password"})
		if i <= maxFailures {
			if !errors.Is(err, api.ErrUnauthenticated) {
				t.Fatalf("wrong password %d: got %v; want unauthenticated", i, err)
			}
			continue
		}
		wantRateLimited(t, err, 60)
	}
	if n := count(t, env, `SELECT count(*) FROM audit_logs WHERE action = 'auth.login_refused' AND target_id = $1`, bob.Email); n != 20 {
		t.Fatalf("audited refusals: got %d; want 20", n)
	}
	if n := count(t, env, `SELECT count(*) FROM audit_logs WHERE action = 'auth.login_refused' AND detail->>'code' = 'rate_limited'`); n != 20-maxFailures {
		t.Fatalf("audited rate-limited refusals: got %d; want %d", n, 20-maxFailures)
	}
	// Locked out, even the right password is refused, and opens nothing.
	_, err := anon.Login(ctx, api.LoginRequest{Email: bob.Email, Password: pw})
	wantRateLimited(t, err, 60)
	if got := count(t, env, `SELECT count(*) FROM sessions`); got != sessions {
		t.Fatalf("sessions: got %d; want %d", got, sessions)
	}
	// An unknown email is counted the same way: no telling who exists.
	for i := 1; i <= maxFailures; i++ {
		if _, err := anon.Login(ctx, api.LoginRequest{Email: "nobody@example.test", Password: "wrong password"}); !errors.Is(err, api.ErrUnauthenticated) {
			t.Fatalf("unknown email %d: got %v; want unauthenticated", i, err)
		}
	}
	_, err = anon.Login(ctx, api.LoginRequest{Email: "nobody@example.test", Password: "wrong password"})
	wantRateLimited(t, err, 60)
	// Other accounts are not affected.
	if _, err := anon.Login(ctx, api.LoginRequest{Email: controldtest.AdminEmail, Password: controldtest.AdminPassword}); err != nil {
		t.Fatalf("another account's login: %v", err)
	}

	clock.Advance(identity.DefaultAccountLimit.Lockout)
	if _, err := anon.Login(ctx, api.LoginRequest{Email: bob.Email, Password: pw}); err != nil {
		t.Fatalf("right password after the lockout: %v", err)
	}
	if n, err := identity.Failures(ctx, env.Server.Pool(), identity.ClientKey(bob.Email, "")); err != nil || n != 0 {
		t.Fatalf("failures after a success: got %d, %v; want 0", n, err)
	}
	for i := 1; i <= maxFailures; i++ {
		if _, err := anon.Login(ctx, api.LoginRequest{Email: bob.Email, Password: "wrong password"}); !errors.Is(err, api.ErrUnauthenticated) {
			t.Fatalf("wrong password %d after the reset: got %v; want unauthenticated", i, err)
		}
	}
}

// TestLoginLimitsConfigured: the budgets come from controld's Config.
func TestLoginLimitsConfigured(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Now())
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, Now: clock.Now,
		LoginLimits: identity.LoginLimits{Account: identity.Limit{MaxFailures: 2, Lockout: 10 * time.Second}}})
	anon := env.AnonClient()
	for range 2 {
		if _, err := anon.Login(t.Context(), api.LoginRequest{Email: controldtest.AdminEmail, Password: "wrong password"}); !errors.Is(err, api.ErrUnauthenticated) {
			t.Fatalf("got %v; want unauthenticated", err)
		}
	}
	_, err := anon.Login(t.Context(), api.LoginRequest{Email: controldtest.AdminEmail, Password: controldtest.AdminPassword})
	if e := wantRateLimited(t, err, 10); e.RetryAfterSeconds != 10 {
		t.Fatalf("retry after %ds; want 10", e.RetryAfterSeconds)
	}
	clock.Advance(10 * time.Second)
	if _, err := anon.Login(t.Context(), api.LoginRequest{Email: controldtest.AdminEmail, Password: controldtest.AdminPassword}); err != nil {
		t.Fatal(err)
	}
}

// TestAPIRateLimit: each user has a token bucket; one user over it is
// refused with a retry-after while another is not affected, and the
// bucket refills with time.
func TestAPIRateLimit(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Now())
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, Now: clock.Now,
		APIRateLimit: controld.RateLimit{Rate: 1, Burst: 3}})
	ctx := t.Context()
	_, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	_, carolToken := env.AddUser(t, "carol@example.test", api.RoleUser)
	bob, carol := env.Client(bobToken), env.Client(carolToken)

	for i := range 3 {
		if _, err := bob.Whoami(ctx); err != nil {
			t.Fatalf("bob's call %d: %v", i+1, err)
		}
	}
	_, err := bob.Whoami(ctx)
	if e := wantRateLimited(t, err, 1); !strings.Contains(e.Message, "rate limit") {
		t.Fatalf("got %q; want it to say the account is over its rate limit", e.Message)
	}
	// A refused mutation changes nothing.
	projects := count(t, env, `SELECT count(*) FROM projects`)
	_, err = bob.ProjectCreate(ctx, api.ProjectCreateRequest{Name: "bobs"})
	wantRateLimited(t, err, 1)
	if got := count(t, env, `SELECT count(*) FROM projects`); got != projects {
		t.Fatalf("projects: got %d; want %d", got, projects)
	}
	// Public endpoints are not counted against anyone.
	if _, err := bob.AuthConfig(ctx); err != nil {
		t.Fatalf("auth.config: %v", err)
	}
	// Carol has her own bucket.
	for i := range 3 {
		if _, err := carol.Whoami(ctx); err != nil {
			t.Fatalf("carol's call %d while bob is limited: %v", i+1, err)
		}
	}
	clock.Advance(time.Second)
	if _, err := bob.Whoami(ctx); err != nil {
		t.Fatalf("bob after a second: %v", err)
	}
	_, err = bob.Whoami(ctx)
	wantRateLimited(t, err, 1)
}
