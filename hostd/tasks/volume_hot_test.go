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
	"syscall"
	"testing"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestHotAttachBareMetal: a volume attached to a running bare-metal
// allocation is mounted nodev,nosuid at its path for the allocation's
// user and linked as ~/NAME; a detach while a process works in it (its
// working directory, or only a file open) is refused naming the path, the
// volume still mounted and reachable; once nothing uses it the detach
// unmounts it and the path is gone for the user; attached again, the file
// is there with the same content.
func TestHotAttachBareMetal(t *testing.T) {
	env := systemHost(t)
	pid := strconv.Itoa(os.Getpid())
	if _, _, err := run(t, env, api.TaskVolumeCreate, hostproto.VolumeTaskParams{VolumeID: "vol-hot" + pid, SizeBytes: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	allocID := "a-hot" + pid
	ten := provisionTenant(t, env, allocID)
	p := api.VolumeHotParams{AllocationID: allocID, PosixUser: ten.name, Shape: api.ShapeBaremetal,
		Volume: api.VolumeAttachment{VolumeID: "vol-hot" + pid, Name: "data", Path: "/data/data"}}
	target := filepath.Join(env.VolumeRoot, "/data/data")
	u, err := user.Lookup(ten.name)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(u.HomeDir, "data")

	if _, _, err := run(t, env, api.TaskVolumeAttach, p); err != nil {
		t.Fatal(err)
	}
	mounted := func() string {
		t.Helper()
		info, err := env.Volumes.Stat(context.Background(), p.Volume.VolumeID)
		if err != nil {
			t.Fatal(err)
		}
		return info.MountPoint
	}
	if mp := mounted(); mp != target {
		t.Fatalf("mounted at %q; want %s", mp, target)
	}
	if opts := mountOptions(t, target); !strings.Contains(opts, "nodev") || !strings.Contains(opts, "nosuid") {
		t.Errorf("mount options %q; want nodev,nosuid", opts)
	}
	if got, err := os.Readlink(link); err != nil || got != target {
		t.Fatalf("~/data -> %q, %v; want %s", got, err, target)
	}
	ten.run(t, "cd "+link+" && head -c 1048576 /dev/urandom > w && sha256sum w > w.sha")
	sum, err := os.ReadFile(filepath.Join(target, "w.sha"))
	if err != nil {
		t.Fatal(err)
	}

	for _, busy := range []struct{ name, dir, script string }{
		{name: "working directory", dir: target, script: "exec sleep 60"},
		{name: "open file", dir: "/", script: "exec 3<" + target + "/w; exec sleep 60"},
	} {
		t.Run(busy.name, func(t *testing.T) {
			holder := startAs(t, ten, busy.dir, busy.script)
			_, _, err := run(t, env, api.TaskVolumeDetach, p)
			if !errors.Is(err, hostenv.ErrVolumeBusy) || !strings.Contains(err.Error(), "volume data is busy on "+allocID+": close what uses /data/data") {
				t.Fatalf("detach while in use: %v; want refused as busy, naming the path", err)
			}
			if mp := mounted(); mp != target {
				t.Fatalf("after a refused detach mounted at %q; want still %s", mp, target)
			}
			if _, err := os.Stat(filepath.Join(link, "w")); err != nil {
				t.Fatalf("after a refused detach: %v; want the file still reachable", err)
			}
			_ = holder.Process.Kill()
			_ = holder.Wait()
		})
	}

	if _, _, err := run(t, env, api.TaskVolumeDetach, p); err != nil {
		t.Fatal(err)
	}
	if mp := mounted(); mp != "" {
		t.Fatalf("after detach mounted at %q; want not mounted", mp)
	}
	if _, err := os.Lstat(link); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("~/data after detach: %v; want gone", err)
	}
	if out, err := ten.try("cat " + target + "/w.sha"); err == nil {
		t.Errorf("the user reads %s after detach: %q; want it gone", target+"/w.sha", out)
	}
	// A retried detach finds nothing to do.
	if _, _, err := run(t, env, api.TaskVolumeDetach, p); err != nil {
		t.Fatalf("detach again: %v", err)
	}

	if _, _, err := run(t, env, api.TaskVolumeAttach, p); err != nil {
		t.Fatal(err)
	}
	if out := ten.run(t, "cd "+link+" && sha256sum -c w.sha"); !strings.Contains(out, "OK") {
		t.Fatalf("after attaching again: %q; want the file intact", out)
	}
	if again, err := os.ReadFile(filepath.Join(target, "w.sha")); err != nil || string(again) != string(sum) {
		t.Fatalf("checksum file %q, %v; want %q", again, err, sum)
	}
}

// TestHotAttachRefusesBadParams: params that are not a volume, name or
// mount path are refused before anything is mounted.
func TestHotAttachRefusesBadParams(t *testing.T) {
	env := systemHost(t)
	for _, v := range []api.VolumeAttachment{
		{VolumeID: "../etc", Name: "data", Path: "/data/data"},
		{VolumeID: "vol-x", Name: "Data!", Path: "/data/data"},
		{VolumeID: "vol-x", Name: "data", Path: "/etc"},
	} {
		p := api.VolumeHotParams{AllocationID: "a-x", PosixUser: "gpuaas-a-x", Shape: api.ShapeBaremetal, Volume: v}
		for _, typ := range []string{api.TaskVolumeAttach, api.TaskVolumeDetach} {
			if _, _, err := run(t, env, typ, p); err == nil || !strings.Contains(err.Error(), "invalid") {
				t.Errorf("%s %+v: %v; want invalid params", typ, v, err)
			}
		}
	}
}

// startAs starts script as the tenant in dir and returns it once it has
// started; the test's end kills it.
func startAs(t *testing.T, s simTenant, dir, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir, cmd.Env = dir, []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.gid)}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Wait until it runs sleep (its fd and cwd are set by then).
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/comm"); strings.TrimSpace(string(comm)) == "sleep" {
			return cmd
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the holder never started")
	return nil
}

// mountOptions returns the options of the mount at target (/proc/mounts).
func mountOptions(t *testing.T, target string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[1] == target {
			return f[3]
		}
	}
	return ""
}

// try runs script as the tenant and returns its output and error.
func (s simTenant) try(script string) (string, error) {
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.gid)}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
