package controld_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestPreLoginRequestsLimited: requests without a session are limited per
// connection and per client address (2,000 a second were served from one
// connection): one connection's burst ends in rate_limited; a second
// connection from the same address gets its own burst until the address's
// budget is spent; a logged-in user is not affected.
func TestPreLoginRequestsLimited(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true,
		PreLoginRateLimit:       controld.RateLimit{Rate: 0.01, Burst: 5},
		PreLoginSourceRateLimit: controld.RateLimit{Rate: 0.01, Burst: 8}})
	ctx := t.Context()
	// The callout records each connection's address in the background.
	first := env.KeyClient(t)
	testutil.Eventually(t, "the connection's address to be recorded", func() bool {
		var n int
		_ = env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM bus_connections WHERE kind = 'prelogin' AND source <> ''`).Scan(&n)
		return n >= 2 // env's own KeyConn and first
	})
	calls := func(c *api.Client, n int) (ok int, limited error) {
		for range n {
			if _, err := c.AuthConfig(ctx); err != nil {
				return ok, err
			}
			ok++
		}
		return ok, nil
	}
	if ok, err := calls(first, 10); ok != 5 || !errors.Is(err, api.ErrRateLimited) || !strings.Contains(err.Error(), "this connection") {
		t.Fatalf("one connection: %d answered, then %v; want 5 then rate_limited for the connection", ok, err)
	}
	second := env.KeyClient(t)
	testutil.Eventually(t, "the second connection's address to be recorded", func() bool {
		var n int
		_ = env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM bus_connections WHERE kind = 'prelogin' AND source <> ''`).Scan(&n)
		return n >= 3
	})
	// The address's budget: 8, of which the first connection used 5 (and
	// the env's own login one).
	if ok, err := calls(second, 10); ok >= 5 || !errors.Is(err, api.ErrRateLimited) || !strings.Contains(err.Error(), "your address") {
		t.Fatalf("a second connection from the address: %d answered, then %v; want fewer than 5, then rate_limited for the address", ok, err)
	}
	if _, err := env.Client(env.AdminToken).Whoami(ctx); err != nil {
		t.Fatalf("a logged-in user: %v", err)
	}
}
