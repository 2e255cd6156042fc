package volumes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// hot is a fixture's running allocations and ready volumes.
type hot struct {
	*fixture
}

func newHot(t *testing.T) hot {
	t.Helper()
	f := newFixture(t, 100*gib)
	f.report(t, f.otherNode.ID, 100*gib)
	if err := catalog.Seed(context.Background(), f.pool, catalog.Defaults); err != nil {
		t.Fatal(err)
	}
	return hot{f}
}

// alloc inserts an allocation of project in state on node.
func (h hot) alloc(t *testing.T, project, state, nodeID string) api.Allocation {
	t.Helper()
	a := storetest.Allocation(t, h.pool, api.Allocation{ProjectID: project, UserID: h.user, SKU: "h100-baremetal",
		Shape: api.ShapeBaremetal, GPUs: 8, State: state})
	if _, err := h.pool.Exec(context.Background(), `UPDATE allocations SET node_id = $2 WHERE id = $1`, a.ID, nodeID); err != nil {
		t.Fatal(err)
	}
	a.NodeID = nodeID
	return a
}

// ready makes a ready volume of the fixture's project on node.
func (h hot) ready(t *testing.T, name, nodeName string) api.Volume {
	t.Helper()
	v, err := h.create(t, name, gib, nodeName)
	if err != nil {
		t.Fatal(err)
	}
	if v.NodeID == h.node.ID {
		h.settle(t, v, api.TaskVolumeCreate, hostproto.TaskSucceeded, hostproto.VolumeTaskResult{VolumeID: v.ID, SizeBytes: gib})
	} else if _, err := h.pool.Exec(context.Background(), `UPDATE volumes SET state = 'ready' WHERE id = $1`, v.ID); err != nil {
		t.Fatal(err) // settle reports as the fixture's node
	}
	return h.get(t, v.ID)
}

// attach runs volume.attach's checks and change the way controld does:
// the allocation locked in the project first.
func (h hot) attach(t *testing.T, project, ref, allocID, path string) (api.Volume, error) {
	t.Helper()
	var v api.Volume
	err := h.in(t, func(tx pgx.Tx) error {
		ctx := context.Background()
		a, err := alloc.LockInProject(ctx, tx, project, allocID)
		if err != nil {
			return err
		}
		v, _, err = volumes.AttachRunning(ctx, tx, volumes.HotAttachArgs{ProjectID: project, Volume: ref, Alloc: a, Path: path}, h.now)
		return err
	})
	return v, err
}

func (h hot) detach(t *testing.T, ref, allocID string) (api.Volume, error) {
	t.Helper()
	var v api.Volume
	err := h.in(t, func(tx pgx.Tx) error {
		ctx := context.Background()
		var err error
		v, _, err = volumes.DetachRunning(ctx, tx, h.project, ref, allocID,
			func(id string) (api.Allocation, error) { return alloc.LockInProject(ctx, tx, h.project, id) }, h.now)
		return err
	})
	return v, err
}

// settleFail settles the volume's current task as failed with msg.
func (h hot) settleFail(t *testing.T, v api.Volume, typ, phase, msg string) {
	t.Helper()
	var taskID string
	if err := h.pool.QueryRow(context.Background(), `SELECT task_id FROM volumes WHERE id = $1`, v.ID).Scan(&taskID); err != nil {
		t.Fatal(err)
	}
	err := h.in(t, func(tx pgx.Tx) error {
		_, err := volumes.Settlers()[typ](context.Background(), tx, tasksOutcome(h.fixture, taskID, typ, phase, msg))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHotAttachDetach: a ready volume into a running allocation is
// attaching (held: an alloc create asking for it is refused naming the
// allocation) with a volume.attach task of the allocation for its node,
// attached once the node did it; a failed attach leaves it ready with the
// reason; detach is detaching, then ready; a busy detach leaves it
// attached with the node's reason; once detached it attaches to another
// allocation of the node; alloc.get's read lists it.
func TestHotAttachDetach(t *testing.T) {
	t.Parallel()
	h := newHot(t)
	ctx := context.Background()
	v := h.ready(t, "data", "bm-1")
	a := h.alloc(t, h.project, api.AllocActive, h.node.ID)

	got, err := h.attach(t, h.project, "data", a.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != api.VolumeAttaching || got.AllocationID != a.ID || got.MountPath != "/data/data" {
		t.Fatalf("attach: %+v; want attaching to %s at /data/data", got, a.ID)
	}
	if n := h.count(t, `SELECT count(*) FROM node_tasks WHERE node_id = $1 AND type = $2 AND allocation_id = $3
		AND params->'volume'->>'volume_id' = $4 AND params->'volume'->>'path' = '/data/data'
		AND params->>'posix_user' = $5 AND params->>'shape' = $6`,
		h.node.ID, api.TaskVolumeAttach, a.ID, v.ID, api.PosixUser(a.ID), api.ShapeBaremetal); n != 1 {
		t.Fatalf("volume.attach tasks: %d; want 1", n)
	}
	err = h.in(t, func(tx pgx.Tx) error {
		_, err := volumes.Reserve(ctx, tx, h.project, []api.VolumeMount{{Volume: "data"}}, h.now)
		return err
	})
	wantCode(t, err, api.CodeConflict)
	if !strings.Contains(err.Error(), a.ID) {
		t.Errorf("create asking for an attaching volume: %v; want the allocation named", err)
	}
	_, err = h.detach(t, "data", "")
	wantCode(t, err, api.CodeConflict) // still attaching

	h.settleFail(t, v, api.TaskVolumeAttach, "volume_attach", "mount: no such device")
	if got := h.get(t, v.ID); got.State != api.VolumeReady || got.AllocationID != "" || got.MountPath != "" ||
		!strings.Contains(got.Reason, "no such device") {
		t.Fatalf("after a failed attach: %+v; want ready with the reason", got)
	}

	if _, err := h.attach(t, h.project, v.ID, a.ID, "/workspace/d"); err != nil {
		t.Fatal(err)
	}
	h.settle(t, v, api.TaskVolumeAttach, hostproto.TaskSucceeded, hostproto.VolumeTaskResult{VolumeID: v.ID})
	if got := h.get(t, v.ID); got.State != api.VolumeAttached || got.AllocationID != a.ID || got.MountPath != "/workspace/d" || got.Reason != "" {
		t.Fatalf("after the node attached it: %+v", got)
	}
	var listed []api.AllocVolume
	b := &pgx.Batch{}
	volumes.QueueOfAllocation(b, &listed, a.ID)
	if err := h.pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].VolumeID != v.ID || listed[0].Path != "/workspace/d" || listed[0].State != api.VolumeAttached {
		t.Fatalf("volumes of the allocation: %+v", listed)
	}

	other := h.alloc(t, h.project, api.AllocActive, h.node.ID)
	_, err = h.detach(t, "data", other.ID)
	wantCode(t, err, api.CodeConflict)
	if got, err = h.detach(t, "data", a.ID); err != nil || got.State != api.VolumeDetaching || got.AllocationID != a.ID {
		t.Fatalf("detach: %+v, %v; want detaching", got, err)
	}
	h.settleFail(t, v, api.TaskVolumeDetach, "volume_detach", "volume data is busy on "+a.ID+": close what uses /workspace/d")
	if got := h.get(t, v.ID); got.State != api.VolumeAttached || got.AllocationID != a.ID || !strings.Contains(got.Reason, "busy") {
		t.Fatalf("after a busy detach: %+v; want attached with the reason", got)
	}
	if _, err = h.detach(t, "data", ""); err != nil {
		t.Fatal(err)
	}
	h.settle(t, v, api.TaskVolumeDetach, hostproto.TaskSucceeded, hostproto.VolumeTaskResult{VolumeID: v.ID})
	if got := h.get(t, v.ID); got.State != api.VolumeReady || got.AllocationID != "" || got.MountPath != "" {
		t.Fatalf("after the node detached it: %+v; want ready", got)
	}
	if got, err = h.attach(t, h.project, "data", other.ID, ""); err != nil || got.AllocationID != other.ID {
		t.Fatalf("attach to another allocation of the node: %+v, %v", got, err)
	}
}

// TestHotAttachRefusals: each refusal has its code and reason and changes
// nothing: no volume row changed, no task asked of a node.
func TestHotAttachRefusals(t *testing.T) {
	t.Parallel()
	h := newHot(t)
	ctx := context.Background()
	theirs := ids.New(ids.Project)
	storetest.Project(t, h.pool, theirs, "theirs", h.user, h.now)
	storetest.Member(t, h.pool, theirs, h.user, api.ProjectOwner, h.now)

	ready := h.ready(t, "data", "bm-1")
	h.ready(t, "far", "bm-2")
	h.ready(t, "second", "bm-1")
	creating, err := h.create(t, "fresh", gib, "bm-1")
	if err != nil {
		t.Fatal(err)
	}
	failed, err := h.create(t, "broken", gib, "bm-1")
	if err != nil {
		t.Fatal(err)
	}
	h.settleFail(t, failed, api.TaskVolumeCreate, "volume_create", "no space left")
	held := h.ready(t, "held", "bm-1")
	run := h.alloc(t, h.project, api.AllocActive, h.node.ID)
	holder := h.alloc(t, h.project, api.AllocActive, h.node.ID)
	if _, err := h.attach(t, h.project, held.ID, holder.ID, ""); err != nil {
		t.Fatal(err)
	}
	h.settle(t, held, api.TaskVolumeAttach, hostproto.TaskSucceeded, hostproto.VolumeTaskResult{VolumeID: held.ID})
	// A volume of run's at /data/used: paths at, inside and above it are taken.
	used := h.ready(t, "used", "bm-1")
	if _, err := h.attach(t, h.project, used.ID, run.ID, "/data/used"); err != nil {
		t.Fatal(err)
	}
	provisioning := h.alloc(t, h.project, api.AllocProvisioning, h.node.ID)
	foreign := h.alloc(t, theirs, api.AllocActive, h.node.ID)

	before := h.count(t, `SELECT count(*) FROM node_tasks`)
	var snapshot string
	if err := h.pool.QueryRow(ctx, `SELECT string_agg(id || state || coalesce(allocation_id, '') || mount_path || coalesce(task_id, ''), ',' ORDER BY id) FROM volumes`).Scan(&snapshot); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, project, volume, alloc, path string
		want                               api.Code
		says                               string
	}{
		{name: "volume of another project", project: theirs, volume: "data", alloc: foreign.ID, want: api.CodeNotFound, says: "no volume"},
		{name: "allocation of another project", project: h.project, volume: "data", alloc: foreign.ID, want: api.CodeNotFound, says: foreign.ID},
		{name: "unknown allocation", project: h.project, volume: "data", alloc: "a-nosuch", want: api.CodeNotFound, says: "a-nosuch"},
		{name: "allocation not active", project: h.project, volume: "data", alloc: provisioning.ID, want: api.CodeConflict, says: "provisioning"},
		{name: "volume on another node", project: h.project, volume: "far", alloc: run.ID, want: api.CodeInvalidArgument, says: "bm-2"},
		{name: "volume creating", project: h.project, volume: creating.ID, alloc: run.ID, want: api.CodeConflict, says: "creating"},
		{name: "volume failed", project: h.project, volume: "broken", alloc: run.ID, want: api.CodeConflict, says: "failed"},
		{name: "attached elsewhere", project: h.project, volume: "held", alloc: run.ID, want: api.CodeConflict, says: holder.ID},
		{name: "attaching here already", project: h.project, volume: "used", alloc: run.ID, want: api.CodeConflict, says: "already"},
		{name: "invalid path", project: h.project, volume: "data", alloc: run.ID, path: "/etc/data", want: api.CodeInvalidArgument, says: "/etc/data"},
		{name: "relative path", project: h.project, volume: "data", alloc: run.ID, path: "data/x", want: api.CodeInvalidArgument, says: "mount path"},
		{name: "path of another volume", project: h.project, volume: "second", alloc: run.ID, path: "/data/used", want: api.CodeInvalidArgument, says: "used"},
		{name: "path inside another volume", project: h.project, volume: "second", alloc: run.ID, path: "/data/used/x", want: api.CodeInvalidArgument, says: "overlaps"},
		{name: "path above another volume", project: h.project, volume: "second", alloc: run.ID, path: "/data", want: api.CodeInvalidArgument, says: "overlaps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.attach(t, tc.project, tc.volume, tc.alloc, tc.path)
			wantCode(t, err, tc.want)
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("got %v; want it to say %q", err, tc.says)
			}
		})
	}
	for _, tc := range []struct {
		name, volume, alloc string
		says                string
	}{
		{name: "detach a ready volume", volume: "data", says: "no allocation"},
		{name: "detach from the wrong allocation", volume: "held", alloc: run.ID, says: holder.ID},
		{name: "detach while attaching", volume: "used", says: "being attached"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.detach(t, tc.volume, tc.alloc)
			wantCode(t, err, api.CodeConflict)
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("got %v; want it to say %q", err, tc.says)
			}
		})
	}
	if _, err := h.pool.Exec(ctx, `UPDATE allocations SET state = 'releasing' WHERE id = $1`, holder.ID); err != nil {
		t.Fatal(err)
	}
	_, err = h.detach(t, "held", "")
	wantCode(t, err, api.CodeConflict)
	if !strings.Contains(err.Error(), "release") {
		t.Errorf("detach from a releasing allocation: %v; want its release named", err)
	}
	var after string
	if err := h.pool.QueryRow(ctx, `SELECT string_agg(id || state || coalesce(allocation_id, '') || mount_path || coalesce(task_id, ''), ',' ORDER BY id) FROM volumes`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if n := h.count(t, `SELECT count(*) FROM node_tasks`); n != before || after != snapshot {
		t.Errorf("refusals changed something: %d tasks (want %d), volumes changed: %v", n, before, after != snapshot)
	}
	_ = ready
}

// tasksOutcome is a node's failed result of task taskID of type typ.
func tasksOutcome(f *fixture, taskID, typ, phase, msg string) tasks.Outcome {
	return tasks.Outcome{TaskID: taskID, NodeID: f.node.ID, Type: typ, Now: f.now.Add(time.Second),
		Result: hostproto.TaskResult{NodeID: f.node.ID, TaskID: taskID, Status: hostproto.TaskFailed, Phase: phase, Error: msg}}
}
