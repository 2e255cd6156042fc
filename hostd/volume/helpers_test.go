package volume

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// newStore is a Store in a directory of the test's own; volumes need
// root (loop devices, mount), as hostd has on a node.
func newStore(t *testing.T) (*Images, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("volumes need root (loop devices and mount)")
	}
	base := t.TempDir()
	// Allocation users must reach the mount points below it.
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(Config{Dir: filepath.Join(base, "volumes"), Log: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A failed test leaves nothing mounted or attached.
		ents, _ := os.ReadDir(s.cfg.Dir)
		for _, e := range ents {
			id := strings.TrimSuffix(e.Name(), ".img")
			if CheckID(id) == nil {
				_ = s.Unmount(context.Background(), id)
			}
		}
	})
	return s, base
}

// runAs runs a shell command as uid:gid (no account needed) and returns
// its combined output.
func runAs(t *testing.T, uid, gid int, script string) (string, error) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustRunAs(t *testing.T, uid, gid int, script string) string {
	t.Helper()
	out, err := runAs(t, uid, gid, script)
	if err != nil {
		t.Fatalf("as %d: %s: %v: %s", uid, script, err, out)
	}
	return out
}

// owner is the uid of path.
func owner(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// isMountPoint says whether anything is mounted at path.
func isMountPoint(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && unescape(f[4]) == path {
			return true
		}
	}
	return false
}

// mountOptions are the per-mount options of the mount at path.
func mountOptions(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 5 && unescape(f[4]) == path {
			return f[5]
		}
	}
	return ""
}
