package job

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestReadJobVolumes: job.yaml's volumes go in the alloc.create request
// of resources.sku exactly as `alloc create --volume` sends them; a bad
// entry is a usage error naming volumes[i], before anything is sent.
func TestReadJobVolumes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ios, _, _, _ := cmdtest.Streams(false)
	_, sku, err := readJob(ios, write("ok.yaml", "resources: {sku: h100-baremetal, gpus: 8}\nvolumes: ['data:/data/x', ckpt]\nrun: echo hi\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []api.VolumeMount{{Volume: "data", Path: "/data/x"}, {Volume: "ckpt"}}
	if sku.SKU != "h100-baremetal" || sku.GPUs != 8 || !slices.Equal(sku.Volumes, want) {
		t.Errorf("alloc.create request %+v; want h100-baremetal, 8 GPUs, volumes %+v", sku, want)
	}
	_, _, err = readJob(ios, write("bad.yaml", "resources: {sku: h}\nrun: x\nvolumes: [data, 'ckpt:/etc']\n"))
	cmdtest.WantUsageError(t, err, "line 3: volumes[1]: \"ckpt:/etc\": mount path \"/etc\"")
	// --queue cannot wait with volumes: refused before the client is used.
	err = checkJobVolumes(context.Background(), nil, "", want, true)
	cmdtest.WantUsageError(t, err, "volumes: cannot be used with --queue")
}

// TestAttachedAt: with resources.allocation, a volume must be attached
// to that allocation at the path job.yaml says (default /data/NAME), and
// a refusal says where the volume is instead.
func TestAttachedAt(t *testing.T) {
	tests := []struct {
		name string
		m    api.VolumeMount
		v    api.Volume
		want string // "" accepted
	}{
		{"default path", api.VolumeMount{Volume: "data"}, api.Volume{Name: "data", AllocationID: "a-1", MountPath: "/data/data", State: api.VolumeAttached}, ""},
		{"given path", api.VolumeMount{Volume: "data", Path: "/data/x"}, api.Volume{Name: "data", AllocationID: "a-1", MountPath: "/data/x"}, ""},
		{"by id", api.VolumeMount{Volume: "vol-1"}, api.Volume{ID: "vol-1", Name: "data", AllocationID: "a-1", MountPath: "/data/data"}, ""},
		{"other path", api.VolumeMount{Volume: "data", Path: "/data/x"}, api.Volume{Name: "data", AllocationID: "a-1", MountPath: "/data/data"},
			"volume data is attached to allocation a-1 at /data/data, not at /data/x"},
		{"other allocation", api.VolumeMount{Volume: "data"}, api.Volume{Name: "data", AllocationID: "a-2", MountPath: "/data/data"},
			"attached to another allocation, a-2, not to a-1"},
		{"ready", api.VolumeMount{Volume: "data"}, api.Volume{Name: "data", State: api.VolumeReady},
			"volume data is ready, not attached to allocation a-1"},
		{"in a session", api.VolumeMount{Volume: "data"}, api.Volume{Name: "data", State: api.VolumeAttached, Session: &api.VolumeSession{}},
			"open in an sftp session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := attachedAt("a-1", tt.m, &tt.v)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v; want accepted", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v; want %q", err, tt.want)
			}
		})
	}
}
