package tasks_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestJobInImageWritesItsVolumes: a job in an image writes the
// allocation's volume through the ~/NAME link and at its path, as a job
// without an image does, and what it wrote is on the volume after the
// job's container is gone (not in the container's own layer).
func TestJobInImageWritesItsVolumes(t *testing.T) {
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
	ref := tinyJobImage(t)
	if _, _, err := run(t, env, api.TaskVolumeCreate, hostproto.VolumeTaskParams{VolumeID: "vol-jimg", SizeBytes: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	alloc := "a-jimv" + strconv.Itoa(os.Getpid())
	a := provisionWith(t, env, alloc, []api.VolumeAttachment{{VolumeID: "vol-jimg", Name: "ckpt", Path: "/data/ckpt"}})
	target := filepath.Join(env.VolumeRoot, "/data/ckpt")
	a.run(t, "echo from-the-renter > "+target+"/seed")

	out, _, err := run(t, env, api.TaskJobStart, hostproto.JobStartParams{JobID: "j-imgvol", AllocationID: alloc, PosixUser: a.name,
		Wait: 5 * time.Minute, Image: ref,
		Run: `cat ~/ckpt/seed && echo through-the-link > ~/ckpt/a && echo at-its-path > ` + target + `/b`})
	if r := jobReport(t, out, err); !r.Ended || r.ExitCode != 0 || !strings.Contains(r.Output, "from-the-renter") {
		t.Fatalf("job: %+v; want the renter's file read and exit 0", r)
	}
	for name, want := range map[string]string{"a": "through-the-link\n", "b": "at-its-path\n"} {
		got, err := os.ReadFile(filepath.Join(target, name))
		if err != nil || string(got) != want {
			t.Errorf("the volume's %s after the job: %q, %v; want %q", name, got, err, want)
		}
	}
}
