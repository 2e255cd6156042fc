package controld_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
)

// preLoginFrom connects the way `gpuaas login` does before it has a
// session (a key made for the connection), from the loopback address ip,
// so that the auth callout records ip as the connection's source.
func preLoginFrom(t *testing.T, env *controldtest.Env, ip string) *api.Client {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return env.KeyClient(t, nats.SetCustomDialer(dialer))
}

// TestLoginLockoutOnlyLocksTheGuesser is the regression test of
// lockout-as-denial-of-service: wrong passwords from one address, far
// beyond the budget, lock that address out of the account, and the owner
// logging in from another address is let in at once. Both the failures
// that set off a lockout and the account's slowdown are audited.
func TestLoginLockoutOnlyLocksTheGuesser(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true,
		LoginLimits: identity.LoginLimits{Slowdown: identity.Slowdown{Failures: 8}}})
	ctx := t.Context()
	bob, _ := env.AddUser(t, "bob@example.test", api.RoleUser)
	attacker, owner := preLoginFrom(t, env, "127.0.0.2"), preLoginFrom(t, env, "127.0.0.3")
	budget := identity.DefaultAccountLimit.MaxFailures

	limited := 0
	for i := 1; i <= 20; i++ {
		_, err := attacker.Login(ctx, api.LoginRequest{Email: bob.Email, Password: "wrong password"})
		switch {
		case i <= budget && !errors.Is(err, api.ErrUnauthenticated):
			t.Fatalf("guess %d: got %v; want unauthenticated", i, err)
		case i > budget:
			wantRateLimited(t, err, 60)
			limited++
		}
	}
	if _, err := owner.Login(ctx, api.LoginRequest{Email: bob.Email, Password: userPassword}); err != nil {
		t.Fatalf("the owner, from another address, while the attacker is locked out: %v", err)
	}
	// The attacker's failures at bob from its address: the budget,
	// then one lockout; nothing is counted against the owner's address.
	if n := count(t, env, `SELECT count(*) FROM audit_logs WHERE action = 'auth.login_lockout' AND target_id = $1
		AND detail->>'source' = '127.0.0.2' AND detail->>'scope' = 'client' AND (detail->>'locked_seconds')::int = 60`, bob.Email); n != 1 {
		t.Fatalf("audited lockouts of the attacker: got %d; want 1", n)
	}
	if n := count(t, env, `SELECT count(*) FROM audit_logs WHERE action = 'auth.login_refused' AND detail->>'source' = '127.0.0.3'`); n != 0 {
		t.Fatalf("refusals of the owner: got %d; want 0", n)
	}
	if n, err := identity.Failures(ctx, env.Server.Pool(), identity.ClientKey(bob.Email, "127.0.0.3")); err != nil || n != 0 {
		t.Fatalf("the owner's failures: got %d, %v; want 0", n, err)
	}

	// Three more addresses guessing within their budgets slow the
	// account down (audited once): each, having failed, now waits.
	for _, ip := range []string{"127.0.0.4", "127.0.0.5", "127.0.0.6"} {
		c := preLoginFrom(t, env, ip)
		if _, err := c.Login(ctx, api.LoginRequest{Email: bob.Email, Password: "wrong password"}); !errors.Is(err, api.ErrUnauthenticated) {
			t.Fatalf("a guess from %s: got %v; want unauthenticated", ip, err)
		}
	}
	if n := count(t, env, `SELECT count(*) FROM audit_logs WHERE action = 'auth.login_slowdown' AND target_id = $1`, bob.Email); n != 1 {
		t.Fatalf("audited slowdowns: got %d; want 1", n)
	}
	late := preLoginFrom(t, env, "127.0.0.6")
	_, err := late.Login(ctx, api.LoginRequest{Email: bob.Email, Password: "wrong password"})
	wantRateLimited(t, err, 60)
	// The owner has not failed: still let in.
	if _, err := owner.Login(ctx, api.LoginRequest{Email: bob.Email, Password: userPassword}); err != nil {
		t.Fatalf("the owner during the slowdown: %v", err)
	}
}

// userPassword is the password controldtest.Env.AddUser gives.
const userPassword = "another good password"
