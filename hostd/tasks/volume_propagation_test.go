package tasks_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
	"golang.org/x/sys/unix"
)

// Copies of a volume's mount in other mount namespaces, and what a
// detach or a release does about them
// (docs/decisions/0066-volume-mount-propagation.md).

// startHolder starts args (as cred, nil for root) and waits until the
// process it ends as is named comm; the test's end kills it.
func startHolder(t *testing.T, cred *syscall.Credential, comm string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := strconv.Itoa(cmd.Process.Pid)
	testutil.Eventually(t, "the holder to start", func() bool {
		c, _ := os.ReadFile("/proc/" + pid + "/comm")
		return strings.TrimSpace(string(c)) == comm
	})
	return cmd, pid
}

// stopHolder kills the holder and waits for it.
func stopHolder(cmd *exec.Cmd) { _ = cmd.Process.Kill(); _ = cmd.Wait() }

// shareAsSystemd makes the node's volume root a shared mount before any
// volume is mounted, as systemd makes every mount of a node (and as
// hostd does itself): the case where a copy is a slave (master:N).
func shareAsSystemd(t *testing.T, env *tasks.Env) {
	t.Helper()
	if err := os.MkdirAll(env.VolumeRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-c", "mountpoint -q "+env.VolumeRoot+" || mount --bind "+env.VolumeRoot+" "+env.VolumeRoot+
		"; mount --make-shared "+env.VolumeRoot).CombinedOutput(); err != nil {
		t.Fatalf("share %s: %v %s", env.VolumeRoot, err, out)
	}
}

// hasDevice says whether process pid's mount table has device dev.
func hasDevice(t *testing.T, pid, dev string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[2] == dev {
			return true
		}
	}
	return false
}

// devOf returns the device (major:minor) of the filesystem at dir.
func devOf(t *testing.T, dir string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	d := uint64(st.Dev) //nolint:unconvert // Dev is uint32 on some platforms
	return strconv.FormatUint(uint64(unix.Major(d)), 10) + ":" + strconv.FormatUint(uint64(unix.Minor(d)), 10)
}

type hotVolume struct {
	env    *tasks.Env
	p      api.VolumeHotParams
	target string
	ten    simTenant
}

// attachedVolume makes a volume and attaches it to a new allocation.
func attachedVolume(t *testing.T, env *tasks.Env, tag string) hotVolume {
	t.Helper()
	pid := strconv.Itoa(os.Getpid())
	id := "vol-" + tag + pid
	if _, _, err := run(t, env, api.TaskVolumeCreate, hostproto.VolumeTaskParams{VolumeID: id, SizeBytes: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	alloc := "a-" + tag + pid
	ten := provisionTenant(t, env, alloc)
	path := "/data/" + tag
	p := api.VolumeHotParams{AllocationID: alloc, PosixUser: ten.name, Shape: api.ShapeBaremetal,
		Volume: api.VolumeAttachment{VolumeID: id, Name: tag, Path: path}}
	if _, _, err := run(t, env, api.TaskVolumeAttach, p); err != nil {
		t.Fatal(err)
	}
	return hotVolume{env: env, p: p, target: filepath.Join(env.VolumeRoot, path), ten: ten}
}

func (v hotVolume) mountPoint(t *testing.T) string {
	t.Helper()
	info, err := v.env.Volumes.Stat(context.Background(), v.p.Volume.VolumeID)
	if err != nil {
		t.Fatal(err)
	}
	return info.MountPoint
}

func (v hotVolume) detach(t *testing.T) error {
	t.Helper()
	_, _, err := run(t, v.env, api.TaskVolumeDetach, v.p)
	return err
}

func (v hotVolume) marker() string {
	return filepath.Join(v.env.StateDir, "volume-held-"+v.p.Volume.VolumeID)
}

// holdElsewhere starts a namespace that copied the node's mounts (a
// slave of them) and bound its copy of the volume elsewhere: the bind is
// a slave of the node's mount too (master:N) before the umount, which it
// outlives (the umount propagates to the copy at the volume's path
// only). The holder's pid is returned.
func holdElsewhere(t *testing.T, v hotVolume) (*exec.Cmd, string) {
	t.Helper()
	inner := t.TempDir()
	return startHolder(t, nil, "sleep", "unshare", "-m", "--propagation", "slave", "sh", "-c",
		"mount --bind "+v.target+" "+inner+" && cd / && exec sleep 600")
}

// TestDetachHeldCopyAfterUnmountIsBusy: a copy of the volume that the
// node's umount does not remove (holdElsewhere: tagged as a slave of the
// node's mount before) makes the detach busy, naming the holder, and never detached: a retry
// and an attach are refused while it lives; once it is gone the detach
// succeeds and the volume can be attached again.
func TestDetachHeldCopyAfterUnmountIsBusy(t *testing.T) {
	env := systemHost(t)
	shareAsSystemd(t, env)
	v := attachedVolume(t, env, "heldcp")
	dev := devOf(t, v.target)
	holder, hpid := holdElsewhere(t, v)

	err := v.detach(t)
	if !errors.Is(err, hostenv.ErrVolumeBusy) || !strings.Contains(err.Error(), hpid) {
		t.Fatalf("detach while a copy outlives the umount: %v; want busy naming process %s", err, hpid)
	}
	if !hasDevice(t, hpid, dev) {
		t.Fatalf("the holder's namespace lost the volume (%s): the test no longer holds it", dev)
	}
	if err := v.detach(t); !errors.Is(err, hostenv.ErrVolumeBusy) {
		t.Fatalf("detach retried while still held: %v; want busy", err)
	}
	if _, _, err := run(t, env, api.TaskVolumeAttach, v.p); !errors.Is(err, hostenv.ErrVolumeBusy) {
		t.Fatalf("attach while the unmounted filesystem lives elsewhere: %v; want busy", err)
	}
	if mp := v.mountPoint(t); mp != "" {
		t.Fatalf("mounted at %q after a refused attach; want not mounted", mp)
	}

	stopHolder(holder)
	if err := v.detach(t); err != nil {
		t.Fatalf("detach once the copy is gone: %v", err)
	}
	if _, err := os.Stat(v.marker()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("held marker after the detach: %v; want it removed", err)
	}
	if _, _, err := run(t, env, api.TaskVolumeAttach, v.p); err != nil {
		t.Fatalf("attach after the detach: %v", err)
	}
}

// TestSharedRootMakesACopyFollowTheUnmount: hostd makes the volume root
// shared, so a namespace that copied the node's mounts after the attach
// (unshare's slave propagation, as a renter's tool makes one) loses the
// volume with the node's umount: the detach succeeds and the copy is
// gone from that namespace.
func TestSharedRootMakesACopyFollowTheUnmount(t *testing.T) {
	env := systemHost(t)
	v := attachedVolume(t, env, "follow")
	dev := devOf(t, v.target)
	_, hpid := startHolder(t, nil, "sleep", "unshare", "-m", "--propagation", "slave", "sleep", "600")
	if !hasDevice(t, hpid, dev) {
		t.Fatal("the copy has no mount of the volume")
	}
	if err := v.detach(t); err != nil {
		t.Fatalf("detach with a slave copy: %v; want it detached", err)
	}
	if hasDevice(t, hpid, dev) {
		t.Fatal("the copy still has the volume after the detach")
	}
}

// TestDetachAfterDeviceNumberReused: a held marker names the device the
// filesystem was on; once that device is let go and its number is
// another filesystem's (mounted on the node), the detach of the volume
// is not busy because of it.
func TestDetachAfterDeviceNumberReused(t *testing.T) {
	env := systemHost(t)
	shareAsSystemd(t, env)
	v := attachedVolume(t, env, "reuse")
	dev := devOf(t, v.target)
	holder, _ := holdElsewhere(t, v)
	if err := v.detach(t); !errors.Is(err, hostenv.ErrVolumeBusy) {
		t.Fatalf("detach while held: %v; want busy", err)
	}
	stopHolder(holder)
	// The loop device goes with its last mount (autoclear).
	minor := dev[strings.Index(dev, ":")+1:]
	loop := "/dev/loop" + minor
	testutil.Eventually(t, loop+" to be let go", func() bool {
		_, err := os.Stat("/sys/dev/block/" + dev + "/loop/backing_file")
		return err != nil
	})
	// Another filesystem on that very device number, mounted on the node.
	img := filepath.Join(t.TempDir(), "other.img")
	mnt := t.TempDir()
	sh := "truncate -s 16M " + img + " && mkfs.ext4 -q " + img + " && losetup " + loop + " " + img + " && mount " + loop + " " + mnt
	if out, err := exec.Command("sh", "-c", sh).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v %s", sh, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run(); _ = exec.Command("losetup", "-d", loop).Run() })
	if got := devOf(t, mnt); got != dev {
		t.Fatalf("the other filesystem is on %s; want %s", got, dev)
	}
	if err := v.detach(t); err != nil {
		t.Fatalf("detach with the device number another's: %v", err)
	}
	if _, err := os.Stat(v.marker()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("held marker after the detach: %v; want it removed", err)
	}
}

// TestReleaseHeldVolumeIsRetried: a release whose unmount leaves the
// volume's filesystem alive in another namespace fails its volume phase
// (busy, retried), the volume never reported released while it lives;
// once the copy is gone the release succeeds.
func TestReleaseHeldVolumeIsRetried(t *testing.T) {
	env := systemHost(t)
	shareAsSystemd(t, env)
	v := attachedVolume(t, env, "relheld")
	holder, hpid := holdElsewhere(t, v)
	rel := hostproto.UserDeprovisionParams{AllocationID: v.p.AllocationID, PosixUser: v.ten.name}
	_, _, err := run(t, env, api.TaskDeprovisionUser, rel)
	var pe *tasks.PhaseError
	if !errors.As(err, &pe) || pe.Phase != tasks.PhaseVolumeDetach || !errors.Is(err, hostenv.ErrVolumeBusy) || !strings.Contains(err.Error(), hpid) {
		t.Fatalf("release while the volume lives elsewhere: %v; want busy in %s naming %s", err, tasks.PhaseVolumeDetach, hpid)
	}
	if _, _, err := run(t, env, api.TaskDeprovisionUser, rel); !errors.Is(err, hostenv.ErrVolumeBusy) {
		t.Fatalf("release retried while still held: %v; want busy", err)
	}
	stopHolder(holder)
	if _, _, err := run(t, env, api.TaskDeprovisionUser, rel); err != nil {
		t.Fatalf("release once the copy is gone: %v", err)
	}
	if _, err := os.Stat(v.marker()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("held marker after the release: %v; want it removed", err)
	}
}

// TestDetachNeverEndsAnotherUsersNamespace: another allocation's user
// that copied the node's mounts into a user namespace of its own, with a
// process named as podman's pause process, holds the volume: the detach
// is busy naming it, and that process lives on.
func TestDetachNeverEndsAnotherUsersNamespace(t *testing.T) {
	env := systemHost(t)
	v := attachedVolume(t, env, "other")
	other := provisionTenant(t, env, "a-otherns"+strconv.Itoa(os.Getpid()))
	// A program named "podman pause" (its comm), run by the other user.
	dir, err := os.MkdirTemp("/var/tmp", "pausename-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o755)
	fake := filepath.Join(dir, "podman pause")
	if out, err := exec.Command("cp", "/bin/sleep", fake).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	holder, hpid := startHolder(t, &syscall.Credential{Uid: uint32(other.uid), Gid: uint32(other.gid)}, "podman pause",
		"unshare", "-U", "-m", "--map-root-user", "--propagation", "slave", fake, "600")
	err = v.detach(t)
	if !errors.Is(err, hostenv.ErrVolumeBusy) || !strings.Contains(err.Error(), hpid) {
		t.Fatalf("detach while another user's namespace has it: %v; want busy naming %s", err, hpid)
	}
	if _, err := os.Stat("/proc/" + hpid + "/ns/mnt"); err != nil {
		t.Fatalf("the other user's process is gone: %v", err)
	}
	if mp := v.mountPoint(t); mp != v.target {
		t.Fatalf("mounted at %q after a refused detach; want still %s", mp, v.target)
	}
	stopHolder(holder)
	if err := v.detach(t); err != nil {
		t.Fatalf("detach once the other namespace is gone: %v", err)
	}
}

// TestShareVolumeRootsIsIdempotent: hostd's start makes the volume root
// a shared mount (bound onto itself) once; a second start (a restart)
// adds no second mount.
func TestShareVolumeRootsIsIdempotent(t *testing.T) {
	env := systemHost(t)
	mountsAtRoot := func() []string {
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 6 && f[4] == env.VolumeRoot {
				out = append(out, l)
			}
		}
		return out
	}
	if got := mountsAtRoot(); len(got) != 0 {
		t.Fatalf("the volume root is a mount point before hostd starts: %q", got)
	}
	for range 2 {
		tasks.ShareVolumeRoots(context.Background(), env)
		got := mountsAtRoot()
		if len(got) != 1 || !strings.Contains(got[0], " shared:") {
			t.Fatalf("mounts at the volume root after a start: %q; want one, shared", got)
		}
	}
	// hostd stopping with no volume mounted leaves no mount behind.
	tasks.ReleaseVolumeRoots(env)
	if got := mountsAtRoot(); len(got) != 0 {
		t.Fatalf("mounts at the volume root after hostd stopped: %q; want none", got)
	}
}
