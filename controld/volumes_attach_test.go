package controld_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// settleRelease applies a node's successful release of allocation id,
// as controld/hosts does when the node reports it.
func settleRelease(t *testing.T, env *controldtest.Env, id string) {
	t.Helper()
	ctx := context.Background()
	pool := env.Server.Pool()
	var taskID, nodeID, typ string
	if err := pool.QueryRow(ctx, `SELECT id, node_id, type FROM node_tasks WHERE allocation_id = $1 AND type = $2`,
		id, api.TaskDeprovisionUser).Scan(&taskID, &nodeID, &typ); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := alloc.Settlers(nil)[typ](ctx, tx, tasks.Outcome{TaskID: taskID, NodeID: nodeID, AllocationID: id, Type: typ,
		Result: hostproto.TaskResult{NodeID: nodeID, TaskID: taskID, Status: hostproto.TaskSucceeded, Result: json.RawMessage(`{}`)},
		Now:    time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAllocCreateWithVolume: an allocation that asks for a volume goes
// to the volume's node, its provisioning mounts it, and while it is
// attached no other allocation gets it and it cannot be removed; after
// the release it is ready again. Refusals name their reason and change
// nothing.
func TestAllocCreateWithVolume(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	env.Credit(t, controldtest.ProjectName, 10_000_000)
	ctx := t.Context()
	c := env.Client(env.AdminToken)
	p := controldtest.ProjectName
	v, err := c.VolumeCreate(ctx, api.VolumeCreateRequest{Project: p, Name: "data", Size: "1G", Node: "sim-h100-1"})
	if err != nil {
		t.Fatal(err)
	}
	metal := api.AllocCreateRequest{Project: p, SKU: "h100-baremetal", GPUs: 8, Volumes: []api.VolumeMount{{Volume: "data"}}}
	if _, err := c.AllocCreate(ctx, metal); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "creating") {
		t.Fatalf("with a volume still being made: %v; want conflict", err)
	}
	settleVolume(t, env, "data", api.TaskVolumeCreate, hostproto.VolumeTaskResult{VolumeID: v.ID, SizeBytes: 1 << 30})

	allocs := func() int { return count(t, env, `SELECT count(*) FROM allocations`) }
	before := allocs()
	for _, tc := range []struct {
		name string
		req  api.AllocCreateRequest
		want error
		says string
	}{
		{"slice", api.AllocCreateRequest{Project: p, SKU: "h200-slice", GPUs: 1, Volumes: metal.Volumes}, api.ErrInvalidArgument, "cannot hand a volume to a slice"},
		{"queued", api.AllocCreateRequest{Project: p, SKU: "h100-baremetal", GPUs: 8, Queue: true, Volumes: metal.Volumes}, api.ErrInvalidArgument, "--queue"},
		{"unknown volume", api.AllocCreateRequest{Project: p, SKU: "h100-baremetal", GPUs: 8, Volumes: []api.VolumeMount{{Volume: "ghost"}}}, api.ErrNotFound, "ghost"},
		{"bad path", api.AllocCreateRequest{Project: p, SKU: "h100-baremetal", GPUs: 8, Volumes: []api.VolumeMount{{Volume: "data", Path: "/etc"}}}, api.ErrInvalidArgument, "mount path"},
		{"twice", api.AllocCreateRequest{Project: p, SKU: "h100-baremetal", GPUs: 8, Volumes: []api.VolumeMount{{Volume: "data"}, {Volume: v.ID, Path: "/mnt/x"}}}, api.ErrInvalidArgument, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.AllocCreate(ctx, tc.req)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v; want %v saying %q", err, tc.want, tc.says)
			}
			if allocs() != before {
				t.Fatal("a refused create left an allocation")
			}
		})
	}

	// The volume's node taken by an allocation without it: refused (not
	// placed elsewhere), naming the node.
	other, err := c.AllocCreate(ctx, api.AllocCreateRequest{Project: p, SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AllocCreate(ctx, metal); !errors.Is(err, api.ErrNoCapacity) || !strings.Contains(err.Error(), "sim-h100-1, which is in use") {
		t.Fatalf("with the volume's node in use: %v; want no_capacity naming the node", err)
	}
	if _, err := c.AllocRelease(ctx, api.AllocReleaseRequest{ID: other.ID}); err != nil {
		t.Fatal(err)
	}
	settleRelease(t, env, other.ID)
	q, err := c.AllocQuote(ctx, metal)
	if err != nil || !q.Fits || q.NodeID != v.NodeID {
		t.Fatalf("dry run with the volume: %+v, %v; want it to fit on the volume's node %s", q, err, v.NodeID)
	}
	a, err := c.AllocCreate(ctx, api.AllocCreateRequest{Project: p, SKU: "h100-baremetal", GPUs: 8,
		Volumes: []api.VolumeMount{{Volume: "data", Path: "/data"}}})
	if err != nil {
		t.Fatal(err)
	}
	if a.NodeID != v.NodeID {
		t.Fatalf("placed on %s; want the volume's node %s", a.NodeID, v.NodeID)
	}
	var params hostproto.UserProvisionParams
	var raw []byte
	if err := env.Server.Pool().QueryRow(ctx, `SELECT params FROM node_tasks WHERE allocation_id = $1 AND type = $2`,
		a.ID, api.TaskProvisionUser).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &params); err != nil || len(params.Volumes) != 1 ||
		params.Volumes[0] != (api.VolumeAttachment{VolumeID: v.ID, Name: "data", Path: "/data"}) {
		t.Fatalf("provisioning params %s; want the volume at /data", raw)
	}
	got, err := c.VolumeGet(ctx, api.VolumeRef{Project: p, Volume: "data"})
	if err != nil || got.State != api.VolumeAttached || got.AllocationID != a.ID || got.MountPath != "/data" {
		t.Fatalf("volume after the create: %+v, %v; want attached to %s at /data", got, err, a.ID)
	}
	if _, err := c.VolumeRemove(ctx, api.VolumeRef{Project: p, Volume: "data"}); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), a.ID) {
		t.Fatalf("rm while attached: %v; want conflict naming %s", err, a.ID)
	}
	if _, err := c.AllocCreate(ctx, metal); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), a.ID) {
		t.Fatalf("a second allocation with the attached volume: %v; want conflict naming %s", err, a.ID)
	}
	if _, err := c.AllocQuote(ctx, metal); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), a.ID) {
		t.Fatalf("a dry run with the attached volume: %v; want conflict naming %s", err, a.ID)
	}

	if _, err := c.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.VolumeGet(ctx, api.VolumeRef{Project: p, Volume: "data"}); got.State != api.VolumeAttached {
		t.Fatalf("volume while its node releases: %s; want attached until the node has unmounted it", got.State)
	}
	settleRelease(t, env, a.ID)
	if got, _ = c.VolumeGet(ctx, api.VolumeRef{Project: p, Volume: "data"}); got.State != api.VolumeReady || got.AllocationID != "" {
		t.Fatalf("volume after the release: %+v; want ready", got)
	}
	if _, err := c.VolumeRemove(ctx, api.VolumeRef{Project: p, Volume: "data"}); err != nil {
		t.Fatalf("rm after the release: %v", err)
	}
}
