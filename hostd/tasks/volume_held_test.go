package tasks_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestHotDetachRefusedWhileMountedInNamespace: a process in a mount
// namespace of its own that has the volume mounted (as a container's bind
// mount has it; its cwd, root and fds are not under the node's mount
// point) makes a detach busy, naming that process, the volume still
// mounted on the node; once it exits the detach unmounts the volume.
// (docs/decisions/0064-volume-attach-running.md)
func TestHotDetachRefusedWhileMountedInNamespace(t *testing.T) {
	env := systemHost(t)
	pid := strconv.Itoa(os.Getpid())
	if _, _, err := run(t, env, api.TaskVolumeCreate, hostproto.VolumeTaskParams{VolumeID: "vol-held" + pid, SizeBytes: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	allocID := "a-held" + pid
	ten := provisionTenant(t, env, allocID)
	p := api.VolumeHotParams{AllocationID: allocID, PosixUser: ten.name, Shape: api.ShapeBaremetal,
		Volume: api.VolumeAttachment{VolumeID: "vol-held" + pid, Name: "data", Path: "/data/data"}}
	target := filepath.Join(env.VolumeRoot, "/data/data")
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

	// A private copy of the node's mounts, with a bind mount of the
	// volume elsewhere in it, as podman gives a container (-v).
	inner := t.TempDir()
	holder := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		"mount --bind "+target+" "+inner+" && cd / && exec sleep 600")
	holder.Dir = "/"
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	holderPid := strconv.Itoa(holder.Process.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		comm, _ := os.ReadFile("/proc/" + holderPid + "/comm")
		if strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder never started")
		}
		time.Sleep(10 * time.Millisecond)
	}

	_, _, err := run(t, env, api.TaskVolumeDetach, p)
	if !errors.Is(err, hostenv.ErrVolumeBusy) || !strings.Contains(err.Error(), holderPid) {
		t.Fatalf("detach while another namespace mounts it: %v; want busy naming process %s", err, holderPid)
	}
	if mp := mounted(); mp != target {
		t.Fatalf("after a refused detach mounted at %q; want still %s", mp, target)
	}

	_ = holder.Process.Kill()
	_ = holder.Wait()
	if _, _, err := run(t, env, api.TaskVolumeDetach, p); err != nil {
		t.Fatalf("detach once nothing holds it: %v", err)
	}
	if mp := mounted(); mp != "" {
		t.Fatalf("after detach mounted at %q; want not mounted", mp)
	}
}
