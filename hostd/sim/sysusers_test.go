package sim

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
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/term"
)

// needSystemUsers skips unless the test can make real POSIX accounts.
func needSystemUsers(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("system users need root (useradd)")
	}
	for _, tool := range []string{"useradd", "userdel", "pkill", "pgrep", "getent"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
}

// searchableDir is a temporary directory others may pass through (as a
// node's /var/lib is), unlike t.TempDir's; it is removed at cleanup.
func searchableDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gpuaas-simusers-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// randomUser is a user name no other test run on the machine uses.
func randomUser(t *testing.T) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	name := "gt" + hex.EncodeToString(b[:])
	t.Cleanup(func() { removeAccount(name) })
	return name
}

// removeAccount deletes a test's account, whatever became of its sim.
func removeAccount(name string) {
	if u, err := user.Lookup(name); err == nil && u.Name == SystemUserComment {
		_, _ = host.ExecRunner{}.Run(context.Background(), "pkill", "-KILL", "-u", name)
		_, _ = host.ExecRunner{}.Run(context.Background(), "userdel", "--", name)
	}
}

func owner(t *testing.T, path string) (uid, gid uint32, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid, fi.Mode().Perm()
}

func lookupIDs(t *testing.T, name string) (uint32, uint32) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return uint32(uid), uint32(gid)
}

// TestSystemUsersLifecycle: a user is a real account with a private home
// and its keys; stopping parks it (no account, the home shut to root),
// starting again restores it with its files; deleting removes account and
// home, and the name made again gets a fresh home.
func TestSystemUsersLifecycle(t *testing.T) {
	needSystemUsers(t)
	ctx := context.Background()
	root := searchableDir(t)
	dir, homes := filepath.Join(root, "users"), filepath.Join(root, "homes")
	u, err := NewSystemUsers(ctx, dir, homes)
	if err != nil {
		t.Fatal(err)
	}
	name := randomUser(t)
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOxQbfNRUG2dkK4J5Ca1y4KGxvdp3Iu6SMbw6U/9TqLf a@b"
	if err := u.Create(ctx, name, []string{key}); err != nil {
		t.Fatal(err)
	}
	if err := u.Create(ctx, name, nil); !errors.Is(err, host.ErrUserExists) {
		t.Errorf("second Create: got %v; want ErrUserExists", err)
	}
	uid, gid := lookupIDs(t, name)
	if uid == 0 {
		t.Fatal("the user is root")
	}
	home := u.Home(name)
	if got, _, mode := owner(t, home); got != uid || mode != 0o700 {
		t.Errorf("home owned by %d mode %04o; want %d 0700", got, mode, uid)
	}
	if b, err := os.ReadFile(u.AuthorizedKeysPath(name)); err != nil || string(b) != key+"\n" {
		t.Errorf("authorized_keys = %q, %v", b, err)
	}
	if got, _, mode := owner(t, homes); got != 0 || mode != 0o711 {
		t.Errorf("homes owned by %d mode %04o; want root 0711", got, mode)
	}
	acct, err := u.Accounts().Lookup(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if acct.Credential == nil || acct.Credential.Uid != uid || acct.Home != home {
		t.Errorf("account = %+v; want uid %d home %s", acct, uid, home)
	}
	// The machine's own accounts are not the sim's to serve.
	for _, other := range []string{"root", "nobody", "postgres"} {
		if _, err := u.Accounts().Lookup(ctx, other); !errors.Is(err, term.ErrNoAccount) {
			t.Errorf("Lookup(%s): got %v; want ErrNoAccount", other, err)
		}
	}

	// The user's file survives a stop and start, still theirs.
	file := filepath.Join(home, "work.txt")
	if err := os.WriteFile(file, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(file, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := user.Lookup(name); err == nil {
		t.Fatal("the account exists while parked")
	}
	if got, _, mode := owner(t, home); got != 0 || mode != 0o700 {
		t.Errorf("parked home owned by %d mode %04o; want root 0700", got, mode)
	}
	u, err = NewSystemUsers(ctx, dir, homes)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := u.Exists(ctx, name); !ok || err != nil {
		t.Fatalf("Exists after restart = %v, %v", ok, err)
	}
	uid, _ = lookupIDs(t, name)
	for _, p := range []string{home, file, filepath.Join(home, ".ssh", "authorized_keys")} {
		if got, _, _ := owner(t, p); got != uid {
			t.Errorf("%s owned by %d after restart; want the user's %d", p, got, uid)
		}
	}

	if _, err := u.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if ok, _ := u.Exists(ctx, name); ok {
		t.Error("Exists after Delete")
	}
	if _, err := os.Lstat(home); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("home after Delete: %v", err)
	}
	if _, err := u.Delete(ctx, name); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	if err := u.Create(ctx, name, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a new user of the same name found the old file: %v", err)
	}
	if _, err := u.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
}

// TestSystemUsersKillProcesses: deleting a user ends what it runs.
func TestSystemUsersKillProcesses(t *testing.T) {
	needSystemUsers(t)
	ctx := context.Background()
	root := searchableDir(t)
	u, err := NewSystemUsers(ctx, filepath.Join(root, "users"), filepath.Join(root, "homes"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	name := randomUser(t)
	if err := u.Create(ctx, name, nil); err != nil {
		t.Fatal(err)
	}
	uid, gid := lookupIDs(t, name)
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := u.KillProcesses(ctx, name); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("the user's process exited cleanly; want it killed")
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the user's process is still running after KillProcesses")
	}
	if _, err := u.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
}

// TestSystemUsersSweepOrphans: accounts of a sim whose state directory
// was deleted without a clean stop are removed by the next sim to start.
func TestSystemUsersSweepOrphans(t *testing.T) {
	needSystemUsers(t)
	ctx := context.Background()
	gone := searchableDir(t)
	u, err := NewSystemUsers(ctx, filepath.Join(gone, "users"), filepath.Join(gone, "homes"))
	if err != nil {
		t.Fatal(err)
	}
	name := randomUser(t)
	if err := u.Create(ctx, name, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(gone); err != nil { // no Close: a crash, then rm -rf
		t.Fatal(err)
	}
	other := searchableDir(t)
	u2, err := NewSystemUsers(ctx, filepath.Join(other, "users"), filepath.Join(other, "homes"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u2.Close() })
	if _, err := user.Lookup(name); err == nil {
		t.Error("the orphaned account is still there")
	}
}

// TestSystemUsersNeedReachableHomes: homes under a directory others cannot
// search would leave sessions without a home; that is refused at start.
func TestSystemUsersNeedReachableHomes(t *testing.T) {
	needSystemUsers(t)
	shut := t.TempDir() // 0700
	_, err := NewSystemUsers(context.Background(), filepath.Join(shut, "users"), filepath.Join(shut, "homes"))
	if !errors.Is(err, ErrHomesUnreachable) {
		t.Errorf("got %v; want ErrHomesUnreachable", err)
	}
}

// TestSystemUsersAdoptSandboxes: sandbox users of a run as root before
// system users existed become accounts that own their files; a device
// node left there (made by a shell that ran as root) is removed, and a
// hard-linked set-id file keeps its owner without the set-id bit.
func TestSystemUsersAdoptSandboxes(t *testing.T) {
	needSystemUsers(t)
	ctx := context.Background()
	root := searchableDir(t)
	dir, homes := filepath.Join(root, "users"), filepath.Join(root, "homes")
	old, err := NewUsers(dir)
	if err != nil {
		t.Fatal(err)
	}
	name := randomUser(t)
	if err := old.Create(ctx, name, nil); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(old.Home(name), "work.txt")
	if err := os.WriteFile(file, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(filepath.Join(old.Home(name), "null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Fatal(err)
	}
	suid := filepath.Join(old.Home(name), "suid")
	if err := os.WriteFile(suid, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(suid, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(suid, filepath.Join(root, "outside")); err != nil {
		t.Fatal(err)
	}

	u, err := NewSystemUsers(ctx, dir, homes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	if ok, err := u.Exists(ctx, name); !ok || err != nil {
		t.Fatalf("Exists = %v, %v; want the sandbox user adopted", ok, err)
	}
	uid, _ := lookupIDs(t, name)
	moved := filepath.Join(u.Home(name), "work.txt")
	if got, _, _ := owner(t, moved); got != uid {
		t.Errorf("work.txt owned by %d; want the user's %d", got, uid)
	}
	if _, err := os.Lstat(filepath.Join(u.Home(name), "null")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("device node: %v; want it removed", err)
	}
	if got, _, _ := owner(t, filepath.Join(u.Home(name), "suid")); got != 0 {
		t.Errorf("hard-linked file owned by %d; want root still", got)
	}
	if fi, err := os.Stat(filepath.Join(u.Home(name), "suid")); err != nil || fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("hard-linked file: %v, mode %v; want no set-uid bit", err, fi.Mode())
	}
}
