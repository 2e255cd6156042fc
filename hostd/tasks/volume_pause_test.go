package tasks_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/workload/workloadtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// pausesOf lists the pids of uid's podman pause processes.
func pausesOf(t *testing.T, uid int) []string {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, pd := range procs {
		comm, err := os.ReadFile(pd + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "podman pause" {
			continue
		}
		st, err := os.ReadFile(pd + "/status")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(st), "\n") {
			if f, ok := strings.CutPrefix(l, "Uid:"); ok && len(strings.Fields(f)) > 0 && strings.Fields(f)[0] == strconv.Itoa(uid) {
				if _, err := os.Readlink(pd + "/ns/mnt"); err == nil {
					out = append(out, filepath.Base(pd))
				}
			}
		}
	}
	return out
}

// TestDetachEndsTheUsersPodmanPause: after a real rootless workload with
// the volume mounted has ended, the user's podman pause process still has
// a copy of the volume (its mount namespace copied the node's when the
// user's first podman command ran); the detach ends that pause process,
// the user's own, and detaches the volume; the user's next podman command
// works (podman makes a new pause process)
// (docs/decisions/0066-volume-mount-propagation.md).
func TestDetachEndsTheUsersPodmanPause(t *testing.T) {
	_, env := podmanHost(t)
	if env.Volumes == nil {
		t.Skip("this sim host keeps no volumes")
	}
	t.Cleanup(func() {
		vs, _ := env.Volumes.List(context.Background())
		for _, v := range vs {
			_ = env.Volumes.Unmount(context.Background(), v.ID)
		}
	})
	ref := workloadtest.Push(t, workloadtest.Registry(t), "test/wlpause", nil)
	pid := strconv.Itoa(os.Getpid())
	id, alloc := "vol-pause"+pid, "a-pause"+pid
	if _, _, err := run(t, env, api.TaskVolumeCreate, hostproto.VolumeTaskParams{VolumeID: id, SizeBytes: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	a := provisionWith(t, env, alloc, []api.VolumeAttachment{{VolumeID: id, Name: "pz", Path: "/data/pz"}})
	target := filepath.Join(env.VolumeRoot, "/data/pz")
	dev := devOf(t, target)

	if _, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: "w-pz", AllocationID: alloc,
		PosixUser: a.name, Image: ref, Command: []string{workloadtest.App, "write", "/vol/f", "kept"}, NoGPUs: true,
		Mounts: []api.WorkloadMount{{VolumeID: id, Path: "/vol"}}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the workload to exit", func() bool {
		return wlStatus(t, env, alloc, "w-pz").State == api.ContainerExited
	})
	pauses := pausesOf(t, a.uid)
	if len(pauses) == 0 || !hasDevice(t, pauses[0], dev) {
		t.Fatalf("the user's podman pause processes %v: want one with the volume (%s) mounted", pauses, dev)
	}

	p := api.VolumeHotParams{AllocationID: alloc, PosixUser: a.name, Shape: api.ShapeBaremetal,
		Volume: api.VolumeAttachment{VolumeID: id, Name: "pz", Path: "/data/pz"}}
	if _, _, err := run(t, env, api.TaskVolumeDetach, p); err != nil {
		t.Fatalf("detach with only the user's pause process holding the volume: %v", err)
	}
	if info, err := env.Volumes.Stat(context.Background(), id); err != nil || info.MountPoint != "" {
		t.Fatalf("volume after the detach: %+v, %v; want unmounted", info, err)
	}
	for _, pp := range pauses {
		if _, err := os.Readlink("/proc/" + pp + "/ns/mnt"); err == nil {
			t.Fatalf("the user's pause process %s still runs", pp)
		}
	}
	if out := asTenant(t, env, alloc, "ps", "-a", "--format", "{{.Names}}"); !strings.Contains(out, "w-pz") {
		t.Fatalf("podman ps as the user after the detach: %q; want the ended workload listed", out)
	}
	// The written file is on the image: attached again, it is there.
	if _, _, err := run(t, env, api.TaskVolumeAttach, p); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(target, "f")); err != nil || string(b) != "kept" {
		t.Fatalf("the workload's file after detach and attach: %q, %v; want kept", b, err)
	}
}
