package devenv_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/internal/devenv"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestFailedFirstStartStillShowsThePassword: `make dev` on a fresh machine
// created the admin, then stopped on a sim host (pkill missing) before the
// banner, and the generated password was never shown; every later start
// said "password as set before". A first start that fails after making
// the admin must say the password in its error, and it must work.
func TestFailedFirstStartStillShowsThePassword(t *testing.T) {
	dir, dsn := t.TempDir(), testutil.Postgres(t, controldtest.Template)
	// A file where the first sim host's directory goes: the hosts fail to
	// start, after the admin was made.
	if err := os.MkdirAll(filepath.Join(dir, "hosts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts", "sim-slice-1"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := devenv.Start(context.Background(), devenv.Config{DataDir: dir, DatabaseURL: dsn, Hosts: 1, Log: testutil.Logger(t)})
	if err == nil {
		t.Fatal("start with a broken host directory succeeded")
	}
	msg := err.Error()
	i := strings.Index(msg, "password ")
	if i < 0 || !strings.Contains(msg, devenv.AdminEmail) {
		t.Fatalf("the failed first start does not say the admin's password: %v", err)
	}
	password, _, _ := strings.Cut(msg[i+len("password "):], ";")

	if err := os.Remove(filepath.Join(dir, "hosts", "sim-slice-1")); err != nil {
		t.Fatal(err)
	}
	env := start(t, dir, dsn, 1, "")
	if env.AdminCreated || env.PasswordGenerated {
		t.Fatalf("second start made a new admin (created %v, generated %v)", env.AdminCreated, env.PasswordGenerated)
	}
	whoami(t, env, password)
}

// TestStartChecksSimUserToolsFirst: with SystemUsers and no pkill (a
// minimal Debian has no procps), Start says what to install before it
// starts anything: no PostgreSQL cluster, no admin whose password is lost.
func TestStartChecksSimUserToolsFirst(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	dir := t.TempDir()
	_, err := devenv.Start(context.Background(), devenv.Config{DataDir: dir, Hosts: 1, SystemUsers: true, Log: testutil.Logger(t)})
	if !errors.Is(err, sim.ErrNoUserTools) || !strings.Contains(err.Error(), "apt-get install") {
		t.Fatalf("start without useradd/pkill: %v; want ErrNoUserTools with the package to install", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("start without the tools left %d entries in the data dir; want nothing started", len(entries))
	}
}

// TestStartSaysWhyTheGatewayFailed is the regression test of "start: ssh
// gateway did not start": a gateway that failed at start-up (here: its
// host key file readable by others) left Start waiting 30s and saying
// only that; Start must return the gateway's own error.
func TestStartSaysWhyTheGatewayFailed(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "sshgate", "host_ed25519_key")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("not a key"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := devenv.Start(context.Background(), devenv.Config{DataDir: dir, DatabaseURL: testutil.Postgres(t, controldtest.Template),
		Hosts: 1, AdminPassword: "gateway test password", Log: testutil.Logger(t)})
	if err == nil || !strings.Contains(err.Error(), "host key") || strings.Contains(err.Error(), "did not start") {
		t.Fatalf("start: %v; want the gateway's host key error", err)
	}
}
