package tasks_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/workload/workloadtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestWorkloadMountsTheAllocationsVolume runs real rootless containers
// with a volume attached to their allocation (docs/apps.md, "Volumes in
// a container"): the container reads what the renter put on the volume
// and writes files that are the renter's on the node (uid 0 inside);
// read_only refuses writes; a volume mounted for another allocation's
// user, one not mounted at all, and a path of the runtime's refuse the
// start, and no container is made for them.
func TestWorkloadMountsTheAllocationsVolume(t *testing.T) {
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
	ref := workloadtest.Push(t, workloadtest.Registry(t), "test/wlapp", nil)
	for _, id := range []string{"vol-wlmine", "vol-wltheirs", "vol-wlloose"} {
		if _, _, err := run(t, env, api.TaskVolumeCreate, hostproto.VolumeTaskParams{VolumeID: id, SizeBytes: 64 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	pid := strconv.Itoa(os.Getpid())
	allocA, allocB := "a-wlma"+pid, "a-wlmb"+pid
	a := provisionWith(t, env, allocA, []api.VolumeAttachment{{VolumeID: "vol-wlmine", Name: "mine", Path: "/data/mine"}})
	provisionWith(t, env, allocB, []api.VolumeAttachment{{VolumeID: "vol-wltheirs", Name: "theirs", Path: "/data/theirs"}})
	target := filepath.Join(env.VolumeRoot, "/data/mine")
	a.run(t, "echo from-the-renter > "+target+"/seed")

	start := func(id string, mounts []api.WorkloadMount, cmd ...string) (hostproto.WorkloadReport, error) {
		t.Helper()
		out, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: id, AllocationID: allocA,
			PosixUser: a.name, Image: ref, Command: append([]string{workloadtest.App}, cmd...), NoGPUs: true, Mounts: mounts})
		if err != nil {
			return hostproto.WorkloadReport{}, err
		}
		return out.(hostproto.WorkloadReport), nil
	}
	ended := func(id string) hostproto.WorkloadReport {
		t.Helper()
		var r hostproto.WorkloadReport
		testutil.Eventually(t, id+" to exit", func() bool {
			r = wlStatus(t, env, allocA, id)
			return r.State == api.ContainerExited
		})
		return r
	}
	mine := []api.WorkloadMount{{VolumeID: "vol-wlmine", Path: "/vol"}}

	if _, err := start("w-cat", mine, "cat", "/vol/seed"); err != nil {
		t.Fatal(err)
	}
	if r := ended("w-cat"); r.ExitCode != 0 || !strings.Contains(strings.Join(r.LastLines, "\n"), "from-the-renter") {
		t.Errorf("reading the volume in the container: %+v; want the renter's file", r)
	}
	if _, err := start("w-write", mine, "write", "/vol/from-container", "hello"); err != nil {
		t.Fatal(err)
	}
	if r := ended("w-write"); r.ExitCode != 0 {
		t.Fatalf("writing the volume in the container: %+v; want exit 0", r)
	}
	b, err := os.ReadFile(filepath.Join(target, "from-container"))
	fi, serr := os.Stat(filepath.Join(target, "from-container"))
	if err != nil || serr != nil || string(b) != "hello" || int(fi.Sys().(*syscall.Stat_t).Uid) != a.uid {
		t.Errorf("the container's file on the node: %q %v %v; want hello owned by uid %d", b, err, serr, a.uid)
	}

	ro := []api.WorkloadMount{{VolumeID: "vol-wlmine", Path: "/vol", ReadOnly: true}}
	if _, err := start("w-ro", ro, "write", "/vol/refused", "x"); err != nil {
		t.Fatal(err)
	}
	if r := ended("w-ro"); r.ExitCode != 1 || !strings.Contains(strings.Join(r.LastLines, "\n"), "read-only file system") {
		t.Errorf("writing a read-only mount: %+v; want exit 1, read-only file system", r)
	}
	if _, err := os.Stat(filepath.Join(target, "refused")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a read-only mount was written: %v", err)
	}

	for _, tt := range []struct {
		name   string
		mounts []api.WorkloadMount
		want   error
	}{
		{"another allocation's volume", []api.WorkloadMount{{VolumeID: "vol-wltheirs", Path: "/vol"}}, tasks.ErrVolumeNotAttached},
		{"a volume not mounted", []api.WorkloadMount{{VolumeID: "vol-wlloose", Path: "/vol"}}, tasks.ErrVolumeNotAttached},
		{"the runtime's path", []api.WorkloadMount{{VolumeID: "vol-wlmine", Path: "/proc/x"}}, tasks.ErrInvalidParams},
		{"not a volume id", []api.WorkloadMount{{VolumeID: "../../etc", Path: "/vol"}}, tasks.ErrInvalidParams},
	} {
		id := "w-bad" + strconv.Itoa(len(tt.name))
		if _, err := start(id, tt.mounts, "serve"); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v; want %v", tt.name, err, tt.want)
		}
		if r := wlStatus(t, env, allocA, id); r.State != api.ContainerMissing {
			t.Errorf("%s: container %+v; want none", tt.name, r)
		}
	}
}
