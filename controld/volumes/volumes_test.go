package volumes_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestLifecycle: creating → ready (the node made it) → grown → deleting →
// deleted, each step an event, and the name free again afterwards.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10*gib)
	v, err := f.create(t, "data", gib, "bm-1")
	if err != nil {
		t.Fatal(err)
	}
	if v.State != api.VolumeCreating || v.NodeID != f.node.ID || v.Node != "bm-1" || v.SizeBytes != gib || !strings.HasPrefix(v.ID, "vol-") {
		t.Fatalf("created %+v", v)
	}
	if n := f.count(t, `SELECT count(*) FROM node_tasks WHERE node_id = $1 AND type = $2 AND params->>'volume_id' = $3
		AND (params->>'size_bytes')::bigint = $4`, f.node.ID, api.TaskVolumeCreate, v.ID, gib); n != 1 {
		t.Fatalf("volume.create tasks for the node: %d; want 1", n)
	}
	eff := f.settle(t, v, api.TaskVolumeCreate, hostproto.TaskSucceeded, hostproto.VolumeTaskResult{VolumeID: v.ID, SizeBytes: gib})
	if len(eff.Events) != 1 || eff.Events[0].Kind != api.EventVolume {
		t.Fatalf("settle create effect %+v; want one volume event", eff)
	}
	if got := f.get(t, "data"); got.State != api.VolumeReady {
		t.Fatalf("after the node made it: %s; want ready", got.State)
	}

	err = f.in(t, func(tx pgx.Tx) error {
		_, _, err := volumes.Resize(context.Background(), tx, f.project, "data", gib/2, f.now)
		return err
	})
	wantCode(t, err, api.CodeInvalidArgument)
	err = f.in(t, func(tx pgx.Tx) error {
		v, _, err = volumes.Resize(context.Background(), tx, f.project, "data", 2*gib, f.now)
		return err
	})
	if err != nil || v.ResizingTo != 2*gib || v.SizeBytes != gib {
		t.Fatalf("resize: %+v, %v", v, err)
	}
	err = f.in(t, func(tx pgx.Tx) error {
		_, _, err := volumes.Remove(context.Background(), tx, f.project, "data", f.now)
		return err
	})
	wantCode(t, err, api.CodeConflict) // while resizing
	f.settle(t, v, api.TaskVolumeResize, hostproto.TaskSucceeded, hostproto.VolumeTaskResult{VolumeID: v.ID, SizeBytes: 2 * gib})
	if got := f.get(t, v.ID); got.SizeBytes != 2*gib || got.ResizingTo != 0 {
		t.Fatalf("after the node grew it: %+v", got)
	}

	err = f.in(t, func(tx pgx.Tx) error {
		v, _, err = volumes.Remove(context.Background(), tx, f.project, "data", f.now)
		return err
	})
	if err != nil || v.State != api.VolumeDeleting {
		t.Fatalf("remove: %+v, %v", v, err)
	}
	f.settle(t, v, api.TaskVolumeDelete, hostproto.TaskSucceeded, hostproto.VolumeTaskResult{VolumeID: v.ID})
	if got := f.get(t, v.ID); got.State != api.VolumeDeleted {
		t.Fatalf("after the node removed it: %s; want deleted", got.State)
	}
	if _, err := volumes.Get(context.Background(), f.pool, f.project, "data"); err == nil {
		t.Fatal("a deleted volume is still found by name")
	}
	if _, err := f.create(t, "data", gib, "bm-1"); err != nil {
		t.Fatalf("the name of a deleted volume: %v", err)
	}
}

// TestCreateRefusalsChangeNothing: bad names, a name in use, a size over
// the node's room (what volumes being made there will take counted), a
// node that is not there: each refused with its reason, no row, no task.
func TestCreateRefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3*gib)
	if _, err := f.create(t, "first", 2*gib, "bm-1"); err != nil {
		t.Fatal(err)
	}
	rows := func() int {
		return f.count(t, `SELECT count(*) FROM volumes`) + f.count(t, `SELECT count(*) FROM node_tasks`)
	}
	before := rows()
	for _, tc := range []struct {
		name, vol, node string
		size            int64
		code            api.Code
		says            string
	}{
		{"bad name", "Data", "bm-1", gib, api.CodeInvalidArgument, "lowercase"},
		{"name in use", "first", "bm-1", gib, api.CodeConflict, "named first"},
		{"over the room left", "second", "bm-1", 2 * gib, api.CodeNoCapacity, "1G free"},
		{"size not whole MiB", "second", "bm-1", gib + 1, api.CodeInvalidArgument, "MiB"},
		{"no such node", "second", "ghost", gib, api.CodeNotFound, "ghost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.create(t, tc.vol, tc.size, tc.node)
			wantCode(t, err, tc.code)
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if after := rows(); after != before {
				t.Fatalf("rows %d -> %d", before, after)
			}
		})
	}
	// Without --node: the ready node with the most room that reported it.
	v, err := f.create(t, "picked", gib, "")
	if err != nil || v.NodeID != f.node.ID {
		t.Fatalf("picked node %s, %v; want %s (the other reported nothing)", v.NodeID, err, f.node.ID)
	}
	if _, err := f.create(t, "too-big", gib, ""); err == nil {
		t.Fatal("a second 1G fitted in the 1G left after 2G and 1G of 3G were taken")
	}
	// Named, a node that has not reported decides when the task runs.
	if v, err = f.create(t, "unknown-room", 100*gib, "bm-2"); err != nil || v.NodeID != f.otherNode.ID {
		t.Fatalf("on a node without a report: %+v, %v", v, err)
	}
	f.report(t, f.otherNode.ID, 500*gib)
	if v, err = f.create(t, "picked-2", gib, ""); err != nil || v.NodeID != f.otherNode.ID {
		t.Fatalf("picked node %s, %v; want %s (most room)", v.NodeID, err, f.otherNode.ID)
	}
}

// TestFailedTaskFailsTheVolumeAndLateResultsChangeNothing: a node that
// could not make the volume leaves it failed with the reason, which a
// later result of an earlier task does not undo; a failed volume may be
// removed.
func TestFailedTaskFailsTheVolumeAndLateResultsChangeNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10*gib)
	v, err := f.create(t, "data", gib, "bm-1")
	if err != nil {
		t.Fatal(err)
	}
	var createTask string
	if err := f.pool.QueryRow(context.Background(), `SELECT task_id FROM volumes WHERE id = $1`, v.ID).Scan(&createTask); err != nil {
		t.Fatal(err)
	}
	f.settle(t, v, api.TaskVolumeCreate, hostproto.TaskFailed, nil)
	got := f.get(t, v.ID)
	if got.State != api.VolumeFailed || !strings.Contains(got.Reason, "no space left") {
		t.Fatalf("after a failed create: %s (%s); want failed with the node's reason", got.State, got.Reason)
	}
	err = f.in(t, func(tx pgx.Tx) error {
		v, _, err = volumes.Remove(context.Background(), tx, f.project, v.ID, f.now)
		return err
	})
	if err != nil || v.State != api.VolumeDeleting {
		t.Fatalf("remove a failed volume: %+v, %v", v, err)
	}
	// The create task's result again (a duplicate report): nothing.
	if eff := f.settleTask(t, createTask, api.TaskVolumeCreate, hostproto.TaskSucceeded, nil); len(eff.Events) != 0 {
		t.Fatalf("late result changed the volume: %+v", eff)
	}
	if got := f.get(t, v.ID); got.State != api.VolumeDeleting {
		t.Fatalf("state after a late result: %s; want deleting", got.State)
	}
}
