package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// TestScrubUserRemovesOnlyTheUsers: the release's walk removes what the
// uid owns, a directory of its with all it holds, once per filesystem
// (a tmpfs mounted inside another is walked on its own, not twice), and
// nothing else: not the file a link of its points at, not a device node,
// not another user's file, which only loses the user's group.
func TestScrubUserRemovesOnlyTheUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	const uid, gid = 799_999_990, 799_999_991 // no account has them
	dir, err := os.MkdirTemp("/var/tmp", "gpuaas-scrub-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := func(name string) string { return filepath.Join(dir, name) }
	write := func(name string, uid, gid int) {
		t.Helper()
		if err := os.WriteFile(p(name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p(name), uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	write("own", uid, gid)
	write("root", 0, 0)
	write("root-in-users-group", 0, gid)
	if err := os.Symlink(p("root"), p("link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(p("link"), uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p("owndir"), 0o700); err != nil {
		t.Fatal(err)
	}
	write("owndir/root-inside", 0, 0)
	if err := os.Chown(p("owndir"), uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(p("null"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(p("null"), uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p("mnt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", p("mnt"), "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(p("mnt"), unix.MNT_DETACH) })
	write("mnt/own", uid, gid)

	removed, err := host.ScrubUser(context.Background(), "gpuaas-scrub-test", uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	// own, link, owndir and what it held, mnt/own.
	if removed.Files != 5 {
		t.Errorf("removed %d files; want 5", removed.Files)
	}
	for _, gone := range []string{"own", "link", "owndir", "mnt/own"} {
		if _, err := os.Lstat(p(gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v; want it removed", gone, err)
		}
	}
	for name, want := range map[string][2]uint32{"root": {0, 0}, "root-in-users-group": {0, 0}, "null": {uid, gid}} {
		fi, err := os.Lstat(p(name))
		if err != nil {
			t.Errorf("%s: %v; want it kept", name, err)
			continue
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != want[0] || st.Gid != want[1] {
			t.Errorf("%s owned by %d:%d; want %d:%d", name, st.Uid, st.Gid, want[0], want[1])
		}
	}
	if _, err := host.ScrubUser(context.Background(), "root", 0, 0); !errors.Is(err, host.ErrInvalidUser) {
		t.Errorf("scrubbing uid 0: got %v; want ErrInvalidUser", err)
	}
}
