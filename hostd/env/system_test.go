package env_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestProvisionRelease: Provision makes the user, again afresh when one is
// left from an interrupted attempt (replaced), and Release removes it,
// with nothing left for a second Release to fail on.
func TestProvisionRelease(t *testing.T) {
	users, err := sim.NewUsers(filepath.Join(t.TempDir(), "users"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	name := api.PosixUser("a-prov1")
	replaced, err := env.Provision(ctx, users, name, nil)
	if err != nil || replaced {
		t.Fatalf("first Provision: got replaced=%v, %v; want a new user", replaced, err)
	}
	mustWrite(t, filepath.Join(users.Home(name), "half-made"), "x")
	replaced, err = env.Provision(ctx, users, name, nil)
	if err != nil || !replaced {
		t.Fatalf("Provision over a leftover: got replaced=%v, %v; want replaced", replaced, err)
	}
	if _, err := os.Stat(filepath.Join(users.Home(name), "half-made")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the leftover's files survived Provision: %v", err)
	}
	for i := range 2 {
		if err := env.Release(ctx, users, name); err != nil {
			t.Fatalf("Release #%d: %v", i+1, err)
		}
	}
	if ok, err := users.Exists(ctx, name); err != nil || ok {
		t.Errorf("after Release: exists=%v, %v; want gone", ok, err)
	}
}

// TestPOSIXExecAsSystemUser: on a node (root), the posix environment's
// processes run as the allocation's own unprivileged account, and an
// attachment in its home is its own.
func TestPOSIXExecAsSystemUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("system users need root (useradd)")
	}
	for _, tool := range []string{"useradd", "userdel", "pkill", "pgrep", "getent"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	parent, err := os.MkdirTemp("/var/lib", "gpuaas-env-sys-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := sim.NewHostWith(filepath.Join(parent, "state"), sim.H100Baremetal8(), "sim-env", sim.Options{SystemUsers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()
	var b [4]byte
	_, _ = rand.Read(b[:])
	alloc := "a-e" + hex.EncodeToString(b[:])
	name := api.PosixUser(alloc)
	t.Cleanup(func() { _ = env.Release(context.Background(), h.Users, name) })
	if _, err := env.Provision(ctx, h.Users, name, nil); err != nil {
		t.Fatal(err)
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	f := newFactory(t, env.Config{StateDir: filepath.Join(parent, "state"), Accounts: h.Users.Accounts()})
	e, err := f.Open(ctx, env.Alloc{ID: alloc, PosixUser: name, Shape: api.ShapeBaremetal})
	if err != nil {
		t.Fatal(err)
	}
	got, st := run(t, e, env.ExecSpec{Command: "id -u; id -g"})
	if got != u.Uid+"\n"+u.Gid+"\n" || st.Code != 0 || u.Uid == "0" {
		t.Errorf("got %q, %+v; want uid %s and gid %s", got, st, u.Uid, u.Gid)
	}
	src := filepath.Join(parent, "shared")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := e.Attach(ctx, env.Mount{Name: "shared", Source: src}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(u.HomeDir, "shared"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; strconv.Itoa(int(uid)) != u.Uid {
		t.Errorf("attachment owned by uid %d; want %s", uid, u.Uid)
	}
}
