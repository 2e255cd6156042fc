package identity_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/bcrypt"

	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
)

func newService(t testing.TB, cost int) *identity.Service {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := identity.New(identity.Config{SigningKey: key, Settings: identity.Settings{BcryptCost: cost}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The last active admin cannot be disabled, whoever asks (the API only
// lets active admins ask, so there it takes a race; see
// TestDisableAdminsRace in controld).
func TestDisableLastAdmin(t *testing.T) {
	t.Parallel()
	pool := openPool(t)
	ctx := t.Context()
	now := time.Now()
	var admins []api.User
	for _, email := range []string{"a1@example.test", "a2@example.test"} {
		u, err := identity.CreateInvitedUser(ctx, pool, identity.NewUser{Email: email, Role: api.RoleAdmin}, now)
		if err != nil {
			t.Fatal(err)
		}
		admins = append(admins, u)
	}
	if _, _, err := identity.Disable(ctx, pool, admins[0].Email, "system", now); err != nil {
		t.Fatalf("disable the first of two admins: %v", err)
	}
	_, _, err := identity.Disable(ctx, pool, admins[1].ID, "system", now)
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "last active admin") {
		t.Fatalf("disable the last admin: got %v; want a conflict saying so", err)
	}
	if n := count(t, pool, `SELECT count(*) FROM users WHERE role = 'admin' AND disabled_at IS NULL`); n != 1 {
		t.Fatalf("active admins: got %d; want 1", n)
	}
	// Bootstrap refuses while any admin exists, even a disabled one.
	if _, _, err := identity.BootstrapAdmin(ctx, pool, identity.NewUser{Email: "root@example.test"}, now, time.Hour, false); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("bootstrap with admins: got %v; want conflict", err)
	}
}

// loginCases are users whose password logins must all fail alike.
func loginCases(b testing.TB, pool *pgxpool.Pool, s *identity.Service) map[string]string {
	ctx := b.Context()
	now := time.Now()
	if _, err := s.CreateLocalUser(ctx, pool, identity.NewUser{Email: "known@example.test", Password: "the right password"}); err != nil {
		b.Fatal(err)
	}
	if _, err := identity.CreateInvitedUser(ctx, pool, identity.NewUser{Email: "invited@example.test"}, now); err != nil {
		b.Fatal(err)
	}
	if _, err := s.CreateLocalUser(ctx, pool, identity.NewUser{Email: "disabled@example.test", Password: "the right password"}); err != nil {
		b.Fatal(err)
	}
	if _, _, err := identity.Disable(ctx, pool, "disabled@example.test", "system", now); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO users (id, email, role, provider, oidc_issuer, oidc_subject, created_at)
		VALUES ('u-oidc', 'oidc@example.test', 'user', 'oidc', 'https://idp.example.test', 'sub', now())`); err != nil {
		b.Fatal(err)
	}
	return map[string]string{
		"unknown email":  "nobody@example.test",
		"wrong password": "known@example.test",
		"invited":        "invited@example.test",
		"disabled":       "disabled@example.test",
		"oidc user":      "oidc@example.test",
	}
}

func TestLoginRefusalsLookAlike(t *testing.T) {
	t.Parallel()
	pool := openPool(t)
	s := newService(t, bcrypt.MinCost)
	var first *api.Error
	for name, email := range loginCases(t, pool, s) {
		_, err := s.Login(t.Context(), pool, email, "a wrong password")
		var e *api.Error
		if !errors.As(err, &e) || e.Code != api.CodeUnauthenticated {
			t.Fatalf("%s: got %v; want unauthenticated", name, err)
		}
		if first != nil && *e != *first {
			t.Fatalf("%s: got %+v; want the same error as the others, %+v", name, *e, *first)
		}
		first = e
	}
	// A disabled user is told so only with the right password.
	if _, err := s.Login(t.Context(), pool, "disabled@example.test", "the right password"); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("disabled user, right password: got %v; want forbidden", err)
	}
}

// BenchmarkLoginRefusals measures each kind of refused password login at
// the default bcrypt cost: each takes one bcrypt comparison, so timing
// tells nobody which emails exist or what state their account is in.
//
//	go test -run '^$' -bench LoginRefusals ./controld/identity/
func BenchmarkLoginRefusals(b *testing.B) {
	pool := openPool(b)
	s := newService(b, bcrypt.DefaultCost)
	for name, email := range loginCases(b, pool, s) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Login(b.Context(), pool, email, "a wrong password"); !errors.Is(err, api.ErrUnauthenticated) {
					b.Fatal(err)
				}
			}
		})
	}
}
