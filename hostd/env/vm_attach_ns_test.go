package env_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/volume"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestVMHotDetachWithNamespaceCopies: mount namespaces made while a
// volume is mounted in a sim guest copy the mount (rootless podman's
// pause process does, as the unprivileged unshare here does). An ordinary
// copy follows the guest's umount, so what the guest wrote is on the image
// when the detach succeeds; a copy the detach cannot take (a bind on top
// of it in that namespace) makes the detach busy — never a success with
// the filesystem still live — until it is gone.
func TestVMHotDetachWithNamespaceCopies(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop-mounts an ext4 image: needs root")
	}
	for _, tool := range []string{"unshare", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s: %v", tool, err)
		}
	}
	e, hv, alloc := openVM(t)
	ctx := context.Background()
	const vol = "vol-nscopy"
	store, img := lentVolume(t, hv, alloc, vol)
	gp := hv.GuestPath(alloc, "/data/ns")
	guestWrite := func(name, data string) {
		t.Helper()
		var out, errOut bytes.Buffer // one each: stdout and stderr are copied concurrently
		pr, err := e.Exec(ctx, env.ExecSpec{Command: "echo " + data + " >" + gp + "/" + name, Stdout: &out, Stderr: &errOut})
		if err != nil {
			t.Fatal(err)
		}
		if st := pr.Wait(); st.Code != 0 {
			t.Fatalf("guest write: %s%s", out.String(), errOut.String())
		}
	}
	attach := func() {
		t.Helper()
		if err := e.Attach(ctx, env.Mount{Name: vol, Source: img, Path: "/data/ns"}); err != nil {
			t.Fatalf("attach: %v", err)
		}
	}

	// An unprivileged user's namespace copies the mount; the guest writes
	// after the copy was made (the dirty pages a live copy would keep).
	attach()
	copier := holdNamespace(t, []string{"setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
		"unshare", "-U", "-m", "--map-root-user", "--propagation", "slave", "sh", "-c", "echo ready; exec sleep 600"}, gp)
	guestWrite("f", "one")
	if err := e.Detach(ctx, vol); err != nil {
		t.Fatalf("detach with an ordinary copy: %v", err)
	}
	if mountinfoHas(t, copier, gp) {
		t.Errorf("the namespace copy of %s outlived the guest's umount", gp)
	}

	// A bind on top of the copy in its namespace survives the umount:
	// busy, the disk stays plugged and is not mounted again, until the
	// holder is gone.
	attach()
	holder := holdNamespace(t, []string{"unshare", "-m", "--propagation", "slave",
		"sh", "-c", "mount --bind " + gp + " " + gp + " && echo ready && exec sleep 600"}, gp)
	guestWrite("g", "two")
	if err := e.Detach(ctx, vol); !errors.Is(err, env.ErrVolumeBusy) {
		t.Fatalf("detach while another namespace holds the filesystem: %v; want ErrVolumeBusy", err)
	}
	if d := hv.Disks(alloc); len(d) != 1 {
		t.Errorf("a held filesystem's disk was unplugged: %v", d)
	}
	if err := e.Attach(ctx, env.Mount{Name: vol, Source: img, Path: "/data/ns"}); err == nil {
		t.Error("attach again while the filesystem is held elsewhere succeeded: a second live ext4 on the image")
	}
	_ = syscall.Kill(holder, syscall.SIGKILL)
	var derr error
	testutil.Eventually(t, "the holder's namespace goes", func() bool {
		derr = e.Detach(ctx, vol)
		return !errors.Is(derr, env.ErrVolumeBusy)
	})
	if derr != nil {
		t.Fatalf("detach after the holder went: %v", derr)
	}
	if err := store.Return(ctx, vol, alloc); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if _, err := store.Mount(ctx, vol, mnt, 4321, 4321); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Unmount(ctx, vol) }()
	for name, want := range map[string]string{"f": "one", "g": "two"} {
		if b, err := os.ReadFile(filepath.Join(mnt, name)); err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("on the image %s = %q, %v; want %q", name, b, err, want)
		}
	}
}

// lentVolume makes a 16 MiB volume vol in a store of its own and lends
// it to running sim domain alloc, which is destroyed (losing its plugged
// disks and mounts) when the test ends; it returns the store and the
// image lent.
func lentVolume(t *testing.T, hv *sim.Hypervisor, alloc, vol string) (*volume.Images, string) {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() { _ = hv.Destroy(ctx, alloc) })
	store, err := volume.New(volume.Config{Dir: filepath.Join(t.TempDir(), "volumes"), Log: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(ctx, vol, 16*volume.MiB); err != nil {
		t.Fatal(err)
	}
	img, err := store.Lend(ctx, vol, alloc)
	if err != nil {
		t.Fatal(err)
	}
	return store, img
}

// holdNamespace starts argv, which prints "ready" once its mount
// namespace is made, and returns its pid once that namespace has a mount
// at path; it is killed when the test ends.
func holdNamespace(t *testing.T, argv []string, path string) int {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("%v: %q, %v", argv, l, err)
	}
	pid := cmd.Process.Pid
	if !mountinfoHas(t, pid, path) {
		t.Fatalf("the namespace of %v has no mount at %s", argv, path)
	}
	return pid
}

// mountinfoHas reports whether process pid's mount table has a mount at
// path.
func mountinfoHas(t *testing.T, pid int, path string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}
