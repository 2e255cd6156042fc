package tasks_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// systemHost is a bare-metal sim host whose users are real POSIX
// accounts and whose volumes are real ext4 images (root only).
func systemHost(t *testing.T) *tasks.Env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sim system users and volumes need root")
	}
	for _, tool := range []string{"useradd", "userdel", "groupadd", "pkill", "pgrep", "getent", "mkfs.ext4", "losetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	parent, err := os.MkdirTemp("/var/lib", "gpuaas-tasks-volume-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := sim.NewHostWith(filepath.Join(parent, "state"), sim.H100Baremetal8(), "sim-metal", sim.Options{SystemUsers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	env := h.Env("n-test", testutil.Logger(t))
	if env.Volumes == nil {
		t.Fatal("sim host as root keeps no volumes")
	}
	// The volume root hostd made a shared mount (volume_share.go), let
	// go after the volumes.
	t.Cleanup(func() { _ = exec.Command("umount", "-l", env.VolumeRoot).Run() })
	t.Cleanup(func() {
		vs, _ := env.Volumes.List(context.Background())
		for _, v := range vs {
			_ = env.Volumes.Unmount(context.Background(), v.ID)
		}
	})
	return env
}

// provisionWith provisions allocation alloc's user with vols and
// returns it; the test's end releases it.
func provisionWith(t *testing.T, env *tasks.Env, alloc string, vols []api.VolumeAttachment) simTenant {
	t.Helper()
	name := api.PosixUser(alloc)
	t.Cleanup(func() {
		_, _, _ = run(t, env, api.TaskDeprovisionUser, hostproto.UserDeprovisionParams{AllocationID: alloc, PosixUser: name})
	})
	if _, _, err := run(t, env, api.TaskProvisionUser, hostproto.UserProvisionParams{AllocationID: alloc, UserID: "u-1",
		PosixUser: name, Volumes: vols}); err != nil {
		t.Fatal(err)
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return simTenant{name: name, uid: uid, gid: gid}
}

// TestReleaseDetachesVolumesBeforeTheScrub: a bare-metal release removes
// everything the tenant left on the node but its volume, which it
// unmounts first; the next tenant (another uid) finds the volume's files
// and can write them.
func TestReleaseDetachesVolumesBeforeTheScrub(t *testing.T) {
	env := systemHost(t)
	if _, _, err := run(t, env, api.TaskVolumeCreate, hostproto.VolumeTaskParams{VolumeID: "vol-keep", SizeBytes: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	vols := []api.VolumeAttachment{{VolumeID: "vol-keep", Name: "data", Path: "/data/data"}}
	target := filepath.Join(env.VolumeRoot, "/data/data")
	pid := strconv.Itoa(os.Getpid())

	a := provisionWith(t, env, "a-vola"+pid, vols)
	home := func(s simTenant) string {
		u, err := user.Lookup(s.name)
		if err != nil {
			t.Fatal(err)
		}
		return u.HomeDir
	}
	homeA := home(a)
	if got, err := os.Readlink(filepath.Join(homeA, "data")); err != nil || got != target {
		t.Fatalf("~/data -> %q, %v; want a link to %s", got, err, target)
	}
	// Through the link in the home, as a session would; and a leftover
	// in the node's /tmp that the release must remove.
	a.run(t, "umask 077; cd "+homeA+"/data && mkdir ckpt && head -c 1048576 /dev/urandom > ckpt/w && sha256sum ckpt/w > ckpt/w.sha")
	leftover := "/tmp/left-" + a.name
	a.run(t, "umask 077; echo secret > "+leftover)
	sum, err := os.ReadFile(filepath.Join(target, "ckpt/w.sha"))
	if err != nil {
		t.Fatal(err)
	}

	res, _, err := run(t, env, api.TaskDeprovisionUser, hostproto.UserDeprovisionParams{AllocationID: "a-vola" + pid, PosixUser: a.name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the tenant's leftover after release: %v; want it removed", err)
	}
	if r := res.(hostproto.UserDeprovisionResult); r.Removed == nil || r.Removed.Files == 0 {
		t.Fatalf("release result %+v; want the leftover counted", r)
	}
	info, err := env.Volumes.Stat(context.Background(), "vol-keep")
	if err != nil || info.MountPoint != "" {
		t.Fatalf("volume after release: %+v, %v; want it kept and unmounted", info, err)
	}

	b := provisionWith(t, env, "a-volb"+pid, vols)
	if b.uid == a.uid {
		t.Fatalf("the next tenant has the same uid %d", b.uid)
	}
	homeB := home(b)
	out := b.run(t, "cd "+homeB+"/data && sha256sum ckpt/w && echo more >> ckpt/w && echo new > ckpt/n && stat -c %u ckpt/w ckpt/n")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || lines[0] != strings.TrimSpace(string(sum)) {
		t.Fatalf("the next tenant read %q; want the checksum %q", lines, strings.TrimSpace(string(sum)))
	}
	if lines[1] != strconv.Itoa(b.uid) || lines[2] != strconv.Itoa(b.uid) {
		t.Fatalf("owners %v; want the next tenant's uid %d", lines[1:], b.uid)
	}
}

// TestProvisionUndoesItsMountsWhenAVolumeFails: a provisioning whose
// second volume cannot be mounted unmounts the first before removing the
// user, so that removal scrubs nothing of it.
func TestProvisionUndoesItsMountsWhenAVolumeFails(t *testing.T) {
	env := systemHost(t)
	if _, _, err := run(t, env, api.TaskVolumeCreate, hostproto.VolumeTaskParams{VolumeID: "vol-one", SizeBytes: 32 << 20}); err != nil {
		t.Fatal(err)
	}
	alloc := "a-volu" + strconv.Itoa(os.Getpid())
	_, _, err := run(t, env, api.TaskProvisionUser, hostproto.UserProvisionParams{AllocationID: alloc, UserID: "u-1",
		PosixUser: api.PosixUser(alloc), Volumes: []api.VolumeAttachment{
			{VolumeID: "vol-one", Name: "one", Path: "/data/one"}, {VolumeID: "vol-missing", Name: "two", Path: "/data/two"}}})
	var pe *tasks.PhaseError
	if !errors.As(err, &pe) || pe.Phase != tasks.PhaseVolumeAttach {
		t.Fatalf("provision with a missing volume: %v; want a failure in %s", err, tasks.PhaseVolumeAttach)
	}
	if info, err := env.Volumes.Stat(context.Background(), "vol-one"); err != nil || info.MountPoint != "" {
		t.Fatalf("first volume after the failed provisioning: %+v, %v; want unmounted", info, err)
	}
	if _, err := user.Lookup(api.PosixUser(alloc)); err == nil {
		t.Fatal("the user of a failed provisioning is still there")
	}
}
