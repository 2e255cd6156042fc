package workloads_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// volume makes a volume of project on n-1, attached to allocID at path
// when allocID is not empty, else ready.
func (w *world) volume(t *testing.T, project, name, allocID, path string) string {
	t.Helper()
	id := ids.New("vol")
	state := api.VolumeReady
	var alloc *string
	if allocID != "" {
		state, alloc = api.VolumeAttached, &allocID
	}
	if _, err := w.pool.Exec(context.Background(), `INSERT INTO volumes (id, project_id, name, node_id, node_name, size_bytes, state,
		allocation_id, mount_path, created_by, created_at, updated_at) VALUES ($1, $2, $3, 'n-1', 'n1', 1073741824, $4, $5, $6, $7, $8, $8)`,
		id, project, name, state, alloc, path, w.bob.UserID, t0); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestRunWithMounts: an app.run's mounts name volumes attached to its
// allocation (docs/apps.md, "Volumes in a container"); workload.start
// names each by its id with the container path and read_only, never a
// path on the node.
func TestRunWithMounts(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	data := w.volume(t, w.project, "data", w.allocID, "/data/data")
	models := w.volume(t, w.project, "models", w.allocID, "/models")
	wl, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Mounts: []api.AppMount{
		{Volume: "data", Path: "/work"}, {Volume: models, Path: "/root/models", ReadOnly: true}}})
	if err != nil {
		t.Fatal(err)
	}
	_, typ, raw := w.currentTask(t, wl.ID)
	var p hostproto.WorkloadStartParams
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	want := []api.WorkloadMount{{VolumeID: data, Path: "/work"}, {VolumeID: models, Path: "/root/models", ReadOnly: true}}
	if typ != api.TaskWorkloadStart || !slices.Equal(p.Mounts, want) {
		t.Errorf("task %s mounts %+v; want a start with %+v", typ, p.Mounts, want)
	}
}

// TestRunRefusesMountsNotAttachedHere: a volume that is not attached to
// the workload's allocation — ready, another allocation's, another
// project's, unknown — a bad container path, a path or volume twice, a
// slice: each refused naming mounts[i], and nothing written.
func TestRunRefusesMountsNotAttachedHere(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.volume(t, w.project, "data", w.allocID, "/data/data")
	w.volume(t, w.project, "free", "", "")
	w.volume(t, w.project, "elsewhere", w.allocation(t, api.AllocActive, api.ShapeBaremetal), "/data/elsewhere")
	theirs := w.volume(t, w.other, "theirs", "", "")
	slice := w.allocation(t, api.AllocActive, api.ShapeGPUSlice)
	for _, tt := range []struct {
		name   string
		alloc  string
		mounts []api.AppMount
		code   api.Code
		says   string
	}{
		{"ready", w.allocID, []api.AppMount{{Volume: "data", Path: "/a"}, {Volume: "free", Path: "/b"}}, api.CodeInvalidArgument,
			"mounts[1].volume: volume free is ready, not attached to allocation " + w.allocID},
		{"another allocation's", w.allocID, []api.AppMount{{Volume: "elsewhere", Path: "/a"}}, api.CodeInvalidArgument,
			"mounts[0].volume: volume elsewhere is attached to another allocation"},
		{"another project's", w.allocID, []api.AppMount{{Volume: theirs, Path: "/a"}}, api.CodeNotFound, "mounts[0].volume: no volume"},
		{"unknown", w.allocID, []api.AppMount{{Volume: "ghost", Path: "/a"}}, api.CodeNotFound, `mounts[0].volume: no volume "ghost"`},
		{"no volume", w.allocID, []api.AppMount{{Path: "/a"}}, api.CodeInvalidArgument, "mounts[0].volume: required"},
		{"proc", w.allocID, []api.AppMount{{Volume: "data", Path: "/proc/x"}}, api.CodeInvalidArgument, "mounts[0].path"},
		{"relative", w.allocID, []api.AppMount{{Volume: "data", Path: "work"}}, api.CodeInvalidArgument, "mounts[0].path"},
		{"root", w.allocID, []api.AppMount{{Volume: "data", Path: "/"}}, api.CodeInvalidArgument, "mounts[0].path"},
		{"a comma", w.allocID, []api.AppMount{{Volume: "data", Path: "/a,src=/etc"}}, api.CodeInvalidArgument, "mounts[0].path"},
		{"dot dot", w.allocID, []api.AppMount{{Volume: "data", Path: "/a/../etc"}}, api.CodeInvalidArgument, "mounts[0].path"},
		{"path twice", w.allocID, []api.AppMount{{Volume: "data", Path: "/a"}, {Volume: "data", Path: "/a"}}, api.CodeInvalidArgument,
			"mounts[1].path: /a is mounted twice"},
		{"volume twice", w.allocID, []api.AppMount{{Volume: "data", Path: "/a"}, {Volume: "data", Path: "/b"}}, api.CodeInvalidArgument,
			"mounts[1].volume: volume data is mounted twice"},
		{"a slice", slice, []api.AppMount{{Volume: "data", Path: "/a"}}, api.CodeInvalidArgument, "mounts: allocation " + slice + " is a gpu_slice"},
	} {
		_, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: tt.alloc, Mounts: tt.mounts})
		if api.CodeOf(err) != tt.code || err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: %v; want %s saying %q", tt.name, err, tt.code, tt.says)
		}
	}
	if n := w.count(t, `SELECT count(*) FROM workloads`); n != 0 {
		t.Errorf("%d workloads after refused runs; want 0", n)
	}
	if n := w.count(t, `SELECT count(*) FROM node_tasks`); n != 0 {
		t.Errorf("%d node tasks after refused runs; want 0", n)
	}
}
