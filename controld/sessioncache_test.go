package controld_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestSessionCacheHonoursRevocation: a session check cached by a replica
// (for an hour here, so that only the revocation path can end it) is
// refused right after a logout or a disable committed on that replica,
// and soon after on another replica of the same database, which learns of
// it from Postgres' notification.
func TestSessionCacheHonoursRevocation(t *testing.T) {
	t.Parallel()
	const ttl = time.Hour
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, SessionCacheTTL: ttl})
	other := controldtest.Start(t, controldtest.Options{DSN: env.DSN, NoSeed: true, NoNodes: true, SessionCacheTTL: ttl})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	bob, logoutTok := env.AddUser(t, "bob@example.test", api.RoleUser)
	disableTok := env.Login(t, bob.Email, "another good password")

	// Cached on both replicas: each has read each session already.
	for _, tok := range []string{logoutTok, disableTok} {
		for _, c := range []*api.Client{env.Client(tok), other.Client(tok)} {
			for range 2 {
				if _, err := c.Whoami(ctx); err != nil {
					t.Fatalf("whoami before the revocations: %v", err)
				}
			}
		}
	}
	refusedEverywhere := func(tok, what string) {
		t.Helper()
		if _, err := env.Client(tok).Whoami(ctx); !errors.Is(err, api.ErrUnauthenticated) {
			t.Fatalf("whoami on the same replica right after %s got %v; want unauthenticated", what, err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := other.Client(tok).Whoami(ctx)
			if errors.Is(err, api.ErrUnauthenticated) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("whoami on the other replica after %s got %v; want unauthenticated", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	if _, err := env.Client(logoutTok).Logout(ctx); err != nil {
		t.Fatalf("logout: %v", err)
	}
	refusedEverywhere(logoutTok, "logout")

	if _, err := admin.AdminUserDisable(ctx, bob.Email); err != nil {
		t.Fatalf("disable: %v", err)
	}
	refusedEverywhere(disableTok, "disable")
	if _, err := env.Client(disableTok).Whoami(ctx); err == nil || !strings.Contains(err.Error(), "disabled") {
		t.Fatalf("whoami after disable got %v; want the account disabled", err)
	}
	// The admin's own session, cached too, is untouched.
	if _, err := admin.Whoami(ctx); err != nil {
		t.Fatalf("admin's whoami after the revocations: %v", err)
	}
}
