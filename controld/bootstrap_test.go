package controld_test

import (
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestBootstrap: on an empty database, bootstrap migrates and makes the
// first admin, invited; the invite logs them in through controld; a second
// bootstrap is refused and changes nothing.
func TestBootstrap(t *testing.T) {
	t.Parallel()
	dsn := testutil.Postgres(t, nil) // empty: bootstrap migrates it
	ctx := t.Context()
	res, err := controld.Bootstrap(ctx, controld.BootstrapConfig{DatabaseURL: dsn, Email: "root@example.test", Name: "Root"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Admin.Role != api.RoleAdmin || res.Invite.Code == "" {
		t.Fatalf("got %+v; want an admin and an invite code", res)
	}

	env := controldtest.Start(t, controldtest.Options{DSN: dsn, NoSeed: true, NoNodes: true})
	if n := count(t, env, `SELECT count(*) FROM audit_logs WHERE action = 'admin.bootstrap' AND actor_id = 'bootstrap'`); n != 1 {
		t.Fatalf("audited bootstraps: got %d; want 1", n)
	}
	if n := count(t, env, `SELECT count(*) FROM outbox_events WHERE kind = $1`, api.EventUser); n != 1 {
		t.Fatalf("user events: got %d; want 1", n)
	}
	login, err := env.AnonClient().Login(ctx, api.LoginRequest{Invite: res.Invite.Code, Password: "the root password"})
	if err != nil {
		t.Fatalf("redeem the bootstrap invite: %v", err)
	}
	list, err := env.Client(login.Token).AdminUserList(ctx)
	if err != nil || len(list.Users) != 1 || list.Users[0].State != api.UserActive {
		t.Fatalf("user list as the new admin: %v, %+v; want one active admin", err, list)
	}

	before := countEffects(t, env)
	_, err = controld.Bootstrap(ctx, controld.BootstrapConfig{DatabaseURL: dsn, Email: "other@example.test"})
	if !errors.Is(err, api.ErrConflict) {
		t.Fatalf("second bootstrap: got %v; want conflict", err)
	}
	if got := countEffects(t, env); got != before || count(t, env, `SELECT count(*) FROM users`) != 1 {
		t.Fatalf("a refused bootstrap changed rows: got %+v; want %+v", got, before)
	}
	if _, err := controld.Bootstrap(ctx, controld.BootstrapConfig{DatabaseURL: dsn}); err == nil {
		t.Fatal("bootstrap without an email: got no error")
	}
	// The admin set a password: a reissue is refused too.
	if _, err := controld.Bootstrap(ctx, controld.BootstrapConfig{DatabaseURL: dsn, Email: "root@example.test", Reissue: true}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("reissue for an admin with a password: got %v; want conflict", err)
	}
}

// TestBootstrapReissue: a lost first invite is replaced; the old code
// stops working.
func TestBootstrapReissue(t *testing.T) {
	t.Parallel()
	dsn := testutil.Postgres(t, nil)
	ctx := t.Context()
	first, err := controld.Bootstrap(ctx, controld.BootstrapConfig{DatabaseURL: dsn, Email: "root@example.test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := controld.Bootstrap(ctx, controld.BootstrapConfig{DatabaseURL: dsn, Email: "other@example.test", Reissue: true}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("reissue for another email: got %v; want conflict", err)
	}
	second, err := controld.Bootstrap(ctx, controld.BootstrapConfig{DatabaseURL: dsn, Email: "ROOT@example.test", Reissue: true})
	if err != nil {
		t.Fatal(err)
	}
	if second.Admin.ID != first.Admin.ID || second.Invite.Code == first.Invite.Code {
		t.Fatalf("reissue got %+v; want a new code for %s", second, first.Admin.ID)
	}
	env := controldtest.Start(t, controldtest.Options{DSN: dsn, NoSeed: true, NoNodes: true})
	anon := env.AnonClient()
	if _, err := anon.Login(ctx, api.LoginRequest{Invite: first.Invite.Code, Password: "the root password"}); !errors.Is(err, api.ErrUnauthenticated) {
		t.Fatalf("the replaced code: got %v; want unauthenticated", err)
	}
	if _, err := anon.Login(ctx, api.LoginRequest{Invite: second.Invite.Code, Password: "the root password"}); err != nil {
		t.Fatal(err)
	}
}
