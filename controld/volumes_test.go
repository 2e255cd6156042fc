package controld_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// settleVolume applies a node's successful result of the current task of
// volume name (of the default project), as controld/hosts does when the
// node reports it: a test without hostd stands in for the node.
func settleVolume(t *testing.T, env *controldtest.Env, name, typ string, result hostproto.VolumeTaskResult) {
	t.Helper()
	ctx := context.Background()
	pool := env.Server.Pool()
	var taskID, nodeID string
	if err := pool.QueryRow(ctx, `SELECT task_id, node_id FROM volumes WHERE name = $1 AND state <> 'deleted'`, name).
		Scan(&taskID, &nodeID); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(result)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := volumes.Settlers()[typ](ctx, tx, tasks.Outcome{TaskID: taskID, NodeID: nodeID, Type: typ,
		Result: hostproto.TaskResult{NodeID: nodeID, TaskID: taskID, Status: hostproto.TaskSucceeded, Result: raw}, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestVolumeEndpoints: through the API, a member makes, reads, lists,
// grows and removes a volume; a viewer reads but changes nothing, a
// stranger sees nothing; bad sizes are refused with the reason and
// leave nothing.
func TestVolumeEndpoints(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	_, viewerToken := env.AddUser(t, "vera@example.test", api.RoleUser)
	_, strangerToken := env.AddUser(t, "sam@example.test", api.RoleUser)
	if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Project: controldtest.ProjectName,
		Email: "vera@example.test", Role: api.ProjectViewer}); err != nil {
		t.Fatal(err)
	}
	viewer, stranger := env.Client(viewerToken), env.Client(strangerToken)
	p := controldtest.ProjectName

	for _, size := range []string{"0", "-1G", "1.5X", "1.5G", "1G ", "", "100", "20000T", "8M"} {
		_, err := admin.VolumeCreate(ctx, api.VolumeCreateRequest{Project: p, Name: "data", Size: size, Node: "sim-h100-1"})
		if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "size") {
			t.Errorf("size %q: %v; want invalid_argument naming the size", size, err)
		}
	}
	if n := count(t, env, `SELECT count(*) FROM volumes`); n != 0 {
		t.Fatalf("refused creates left %d volumes", n)
	}
	if _, err := viewer.VolumeCreate(ctx, api.VolumeCreateRequest{Project: p, Name: "data", Size: "1G", Node: "sim-h100-1"}); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("create by a viewer: %v; want forbidden", err)
	}

	v, err := admin.VolumeCreate(ctx, api.VolumeCreateRequest{Project: p, Name: "data", Size: "1G", Node: "sim-h100-1"})
	if err != nil {
		t.Fatal(err)
	}
	if v.State != api.VolumeCreating || v.SizeBytes != 1<<30 || v.Node != "sim-h100-1" {
		t.Fatalf("created %+v", v)
	}
	if _, err := admin.VolumeCreate(ctx, api.VolumeCreateRequest{Project: p, Name: "data", Size: "2G", Node: "sim-h100-1"}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("a second volume named data: %v; want conflict", err)
	}
	settleVolume(t, env, "data", api.TaskVolumeCreate, hostproto.VolumeTaskResult{VolumeID: v.ID, SizeBytes: 1 << 30})
	if d, err := admin.NodeGet(ctx, "sim-h100-1"); err != nil || len(d.Volumes) != 1 || d.Volumes[0].ID != v.ID {
		t.Fatalf("node get: %+v, %v; want the node's volume", d, err)
	}
	got, err := viewer.VolumeGet(ctx, api.VolumeRef{Project: p, Volume: "data"})
	if err != nil || got.State != api.VolumeReady || got.ID != v.ID {
		t.Fatalf("get by a viewer: %+v, %v; want ready", got, err)
	}
	if _, err := stranger.VolumeGet(ctx, api.VolumeRef{Project: p, Volume: "data"}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("get by a stranger: %v; want not found", err)
	}
	list, err := viewer.VolumeList(ctx, api.VolumeListRequest{Project: p})
	if err != nil || len(list.Volumes) != 1 || list.Volumes[0].Name != "data" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if _, err := admin.VolumeResize(ctx, api.VolumeResizeRequest{Project: p, Volume: "data", Size: "512M"}); !errors.Is(err, api.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "only grow") {
		t.Fatalf("shrink: %v; want invalid_argument: volumes only grow", err)
	}
	if v, err = admin.VolumeResize(ctx, api.VolumeResizeRequest{Project: p, Volume: "data", Size: "2G"}); err != nil || v.ResizingTo != 2<<30 {
		t.Fatalf("resize: %+v, %v", v, err)
	}
	settleVolume(t, env, "data", api.TaskVolumeResize, hostproto.VolumeTaskResult{VolumeID: v.ID, SizeBytes: 2 << 30})
	if v, err = admin.VolumeRemove(ctx, api.VolumeRef{Project: p, Volume: "data"}); err != nil || v.State != api.VolumeDeleting || v.SizeBytes != 2<<30 {
		t.Fatalf("remove: %+v, %v", v, err)
	}
	if _, err := admin.VolumeRemove(ctx, api.VolumeRef{Project: p, Volume: "data"}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("remove while deleting: %v; want conflict", err)
	}
	var tasksQueued int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM node_tasks WHERE type LIKE 'volume.%'`).Scan(&tasksQueued); err != nil {
		t.Fatal(err)
	}
	if tasksQueued != 3 {
		t.Fatalf("volume tasks queued: %d; want create, resize, delete", tasksQueued)
	}
}
