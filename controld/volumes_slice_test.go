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

// TestSliceWithVolume: a slice SKU with --volume (docs/decisions/0030)
// is refused on a node whose health does not say its slices take volumes
// (the sim's slices are SSH servers with no disk to mount), and placed on
// the volume's node when it does, its vm_provision carrying the volume;
// its release hands the volume back (ready). Another project's volume is
// refused for a slice as for bare metal.
func TestSliceWithVolume(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	env.Credit(t, controldtest.ProjectName, 10_000_000)
	ctx := t.Context()
	c := env.Client(env.AdminToken)
	p := controldtest.ProjectName
	pool := env.Server.Pool()
	v, err := c.VolumeCreate(ctx, api.VolumeCreateRequest{Project: p, Name: "ckpt", Size: "1G", Node: "sim-h200-1"})
	if err != nil {
		t.Fatal(err)
	}
	settleVolume(t, env, "ckpt", api.TaskVolumeCreate, hostproto.VolumeTaskResult{VolumeID: v.ID, SizeBytes: 1 << 30})
	req := api.AllocCreateRequest{Project: p, SKU: "h200-slice", GPUs: 2, Volumes: []api.VolumeMount{{Volume: "ckpt"}}}
	allocs := func() int { return count(t, env, `SELECT count(*) FROM allocations`) }
	before := allocs()

	// The sim node's health says nothing of volumes in slices.
	if _, err := c.AllocCreate(ctx, req); !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "cannot hand a volume to a slice") {
		t.Fatalf("a slice with a volume on a node whose slices do not take them: %v; want invalid_argument saying why", err)
	}
	if _, err := c.AllocQuote(ctx, req); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("its dry run: %v; want invalid_argument", err)
	}
	if allocs() != before {
		t.Fatal("a refused create left an allocation")
	}
	if got, _ := c.VolumeGet(ctx, api.VolumeRef{Project: p, Volume: "ckpt"}); got.State != api.VolumeReady {
		t.Fatalf("after the refusal the volume is %s; want ready", got.State)
	}

	// The node reports that its slices take volumes (hostd's
	// HealthReport.SliceVolumes on a real slice host).
	if _, err := pool.Exec(ctx, `UPDATE nodes SET health = coalesce(health, '{}'::jsonb) ||
		jsonb_build_object('probe', coalesce(health->'probe', '{}'::jsonb) || '{"slice_volumes": true}'::jsonb)
		WHERE id = $1`, v.NodeID); err != nil {
		t.Fatal(err)
	}
	a, err := c.AllocCreate(ctx, req)
	if err != nil {
		t.Fatalf("a slice with a volume on a node whose slices take them: %v", err)
	}
	if a.NodeID != v.NodeID || len(a.Slots) != 2 {
		t.Fatalf("placed on %s with %d slots; want the volume's node %s with 2", a.NodeID, len(a.Slots), v.NodeID)
	}
	var raw []byte
	if err := pool.QueryRow(ctx, `SELECT params FROM node_tasks WHERE allocation_id = $1 AND type = $2`,
		a.ID, api.TaskVMProvision).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var params hostproto.VMProvisionParams
	if err := json.Unmarshal(raw, &params); err != nil || len(params.Volumes) != 1 ||
		params.Volumes[0] != (api.VolumeAttachment{VolumeID: v.ID, Name: "ckpt", Path: "/data/ckpt"}) {
		t.Fatalf("vm_provision params %s; want the volume at /data/ckpt", raw)
	}
	if got, err := c.VolumeGet(ctx, api.VolumeRef{Project: p, Volume: "ckpt"}); err != nil || got.State != api.VolumeAttached || got.AllocationID != a.ID {
		t.Fatalf("volume after the create: %+v, %v; want attached to %s", got, err, a.ID)
	}
	if _, err := c.AllocCreate(ctx, req); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), a.ID) {
		t.Fatalf("a second slice with the attached volume: %v; want conflict naming %s", err, a.ID)
	}

	// Another project's volume: not found for this project, slice or not.
	if _, err := c.ProjectCreate(ctx, api.ProjectCreateRequest{Name: "other-vols"}); err != nil {
		t.Fatal(err)
	}
	env.Credit(t, "other-vols", 10_000_000)
	if _, err := c.AllocCreate(ctx, api.AllocCreateRequest{Project: "other-vols", SKU: "h200-slice", GPUs: 1,
		Volumes: []api.VolumeMount{{Volume: v.ID}}}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("a slice in another project with this volume: %v; want not_found", err)
	}

	if _, err := c.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID}); err != nil {
		t.Fatal(err)
	}
	settleVMRelease(t, env, a.ID)
	if got, err := c.VolumeGet(ctx, api.VolumeRef{Project: p, Volume: "ckpt"}); err != nil || got.State != api.VolumeReady || got.AllocationID != "" {
		t.Fatalf("volume after the release: %+v, %v; want ready, detached", got, err)
	}
}

// settleVMRelease applies a node's successful slice.vm_release of
// allocation id, as controld/hosts does when the node reports it.
func settleVMRelease(t *testing.T, env *controldtest.Env, id string) {
	t.Helper()
	ctx := context.Background()
	pool := env.Server.Pool()
	var taskID, nodeID string
	if err := pool.QueryRow(ctx, `SELECT id, node_id FROM node_tasks WHERE allocation_id = $1 AND type = $2`,
		id, api.TaskVMRelease).Scan(&taskID, &nodeID); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := alloc.Settlers(nil)[api.TaskVMRelease](ctx, tx, tasks.Outcome{TaskID: taskID, NodeID: nodeID, AllocationID: id,
		Type: api.TaskVMRelease, Result: hostproto.TaskResult{NodeID: nodeID, TaskID: taskID, Status: hostproto.TaskSucceeded,
			Result: json.RawMessage(`{}`)}, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
