package alloc

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestReleaseNamesVolumesThatStay: against a real controld, `alloc
// release` of an allocation with a volume names the volume, its mount
// path and node, and says it stays (kept, still charged); the release of
// one without a volume says nothing of volumes.
func TestReleaseNamesVolumesThatStay(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{})
	env.Credit(t, controldtest.ProjectName, 10_000_000)
	ctx := t.Context()
	c := env.Client(env.AdminToken)
	v, err := c.VolumeCreate(ctx, api.VolumeCreateRequest{Name: "data", Size: "1G", Node: "sim-h100-1"})
	if err != nil {
		t.Fatal(err)
	}
	// The node made it (the create task's result, as hostd reports it).
	if err := pgx.BeginFunc(ctx, env.Server.Pool(), func(tx pgx.Tx) error {
		var taskID, nodeID string
		if err := tx.QueryRow(ctx, `SELECT task_id, node_id FROM volumes WHERE id = $1`, v.ID).Scan(&taskID, &nodeID); err != nil {
			return err
		}
		_, err := volumes.Settlers()[api.TaskVolumeCreate](ctx, tx, tasks.Outcome{TaskID: taskID, NodeID: nodeID,
			Type: api.TaskVolumeCreate, Now: time.Now(), Result: hostproto.TaskResult{NodeID: nodeID, TaskID: taskID,
				Status: hostproto.TaskSucceeded, Result: []byte(`{"volume_id":"` + v.ID + `","size_bytes":1073741824}`)}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	with, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8, Volumes: []api.VolumeMount{{Volume: "data"}}})
	if err != nil {
		t.Fatal(err)
	}
	without, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	release := func(id string) string {
		t.Helper()
		ios, _, _, errOut := cmdtest.Streams(false)
		f := &cmdutil.Factory{IOStreams: ios, Now: time.Now, Client: func() (*api.Client, error) { return c, nil }}
		cmd := NewCmdRelease(f, nil)
		cmd.SetContext(ctx)
		if err := cmdtest.Execute(cmd, id, "--force", "--yes"); err != nil {
			t.Fatalf("release %s: %v (%s)", id, err, errOut)
		}
		return errOut.String()
	}
	want := "Volume data (" + v.ID + ") at /data/data stays on node sim-h100-1: detached and kept, still charged"
	if got := release(with.ID); !strings.Contains(got, want) {
		t.Errorf("release of %s said %q; want %q", with.ID, got, want)
	}
	if got := release(without.ID); strings.Contains(got, "olume") {
		t.Errorf("release of %s said %q; want nothing of volumes", without.ID, got)
	}
}
