package host_test

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
)

// TestPosixUsers creates, checks, kills and deletes a real user; it needs
// root and the shadow and procps tools.
func TestPosixUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, tool := range []string{"useradd", "userdel", "pkill", "pgrep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	ctx := context.Background()
	u := host.PosixUsers{KillWait: 500 * time.Millisecond}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "gpuaastest" + hex.EncodeToString(b[:])
	t.Cleanup(func() { _, _ = u.Delete(context.Background(), name) })

	keys := []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOxQbfNRUG2dkK4J5Ca1y4KGxvdp3Iu6SMbw6U/9TqLf alice@example"}
	if err := u.Create(ctx, name, keys); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := u.Create(ctx, name, keys); !errors.Is(err, host.ErrUserExists) {
		t.Errorf("second Create: got %v; want ErrUserExists", err)
	}
	if ok, err := u.Exists(ctx, name); !ok || err != nil {
		t.Fatalf("Exists = %v, %v; want true", ok, err)
	}
	usr, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(usr.Uid)
	gid, _ := strconv.Atoi(usr.Gid)
	check := func(p string, mode os.FileMode) {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != mode || int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s: mode %v, owner %d:%d; want %v, %d:%d", p, fi.Mode().Perm(), st.Uid, st.Gid, mode, uid, gid)
		}
	}
	check(filepath.Join(usr.HomeDir, ".ssh"), 0o700)
	authKeys := filepath.Join(usr.HomeDir, ".ssh", "authorized_keys")
	check(authKeys, 0o600)
	if got, _ := os.ReadFile(authKeys); string(got) != keys[0]+"\n" {
		t.Errorf("authorized_keys = %q; want %q", got, keys[0]+"\n")
	}

	// A process of the user's is ended by KillProcesses.
	sleep := exec.Command("sleep", "300")
	sleep.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sleep.Wait() }()
	if err := u.KillProcesses(ctx, name); err != nil {
		t.Fatalf("KillProcesses: %v", err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = sleep.Process.Kill()
		t.Fatal("sleep still runs after KillProcesses")
	}
	if err := u.KillProcesses(ctx, name); err != nil {
		t.Errorf("KillProcesses without processes: %v", err)
	}

	if _, err := u.Delete(ctx, name); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if ok, err := u.Exists(ctx, name); ok || err != nil {
		t.Errorf("Exists after Delete = %v, %v; want false", ok, err)
	}
	if _, err := os.Stat(usr.HomeDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("home %s still there: %v", usr.HomeDir, err)
	}
	if _, err := u.Delete(ctx, name); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	if err := u.KillProcesses(ctx, name); err != nil {
		t.Errorf("KillProcesses of a missing user: %v", err)
	}
}

func TestPosixUsersRefuse(t *testing.T) {
	u := host.PosixUsers{Runner: failRunner{t}}
	ctx := context.Background()
	for _, name := range []string{"", "-r", "Root", "a/b", "x123456789012345678901234567890123"} {
		if err := u.Create(ctx, name, nil); !errors.Is(err, host.ErrInvalidUser) {
			t.Errorf("Create(%q): got %v; want ErrInvalidUser", name, err)
		}
	}
	if err := u.Create(ctx, "gpuaastestx", []string{"ssh-ed25519 AAAA a\nssh-rsa BBBB b"}); !errors.Is(err, host.ErrInvalidUser) {
		t.Errorf("Create with a two-line key: got %v; want ErrInvalidUser", err)
	}
}

// failRunner fails the test if anything is run.
type failRunner struct{ t *testing.T }

func (r failRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	r.t.Errorf("ran %s %v", name, args)
	return nil, errors.New("not allowed")
}
