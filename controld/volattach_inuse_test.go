package controld_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestVolumeDetachRefusedInUse: a volume attached to a running bare-metal
// allocation is not detached while a container holds it: an app.run's
// mount of it is refused while it is still being attached; once attached
// and mounted by a workload, volume.detach is refused naming the workload,
// changing nothing; when the workload ended, a job in an image on the
// allocation (hostd binds every mounted volume into it) refuses it naming
// the job; with both ended the detach goes ahead, and an app.run that
// mounts the volume being detached is refused.
// (docs/decisions/0064-volume-attach-running.md)
func TestVolumeDetachRefusedInUse(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	e := &billingEnv{Env: controldtest.Start(t, controldtest.Options{Now: clock.Now, Billing: controld.BillingConfig{Window: time.Minute},
		Unfunded: true, Registry: testRegistry(t)}), clock: clock}
	ctx := t.Context()
	pool := e.Server.Pool()
	c := e.UserClient(t, e.Admin.ID, e.AdminToken)
	e.credit(t, 100_00)
	if _, err := c.ImagePublish(ctx, api.ImagePublishRequest{Name: "tiny", Ref: pushTestImage(t, c, "tiny"), Platform: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := verify(t, c, "tiny"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ImagePromote(ctx, api.ImageChangeRequest{Image: "tiny"}); err != nil {
		t.Fatal(err)
	}
	a := e.activate(t, c, "h100-baremetal", 8)
	if err := node.SetHealth(ctx, pool, a.NodeID, json.RawMessage(`{"volume_free_bytes":107374182400}`), "", "", e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	v, err := c.VolumeCreate(ctx, api.VolumeCreateRequest{Name: "data", Size: "1G", Node: a.NodeID})
	if err != nil {
		t.Fatal(err)
	}
	e.settleVolumeAt(t, v, api.TaskVolumeCreate)
	if _, err := c.VolumeAttach(ctx, api.VolumeAttachRequest{Volume: "data", Allocation: a.ID}); err != nil {
		t.Fatal(err)
	}
	mount := []api.AppMount{{Volume: "data", Path: "/data"}}
	if _, err := c.AppRun(ctx, api.AppRunRequest{Image: "tiny", AllocationID: a.ID, Name: "early", Mounts: mount}); !errors.Is(err, api.ErrConflict) ||
		!strings.Contains(err.Error(), "being attached") {
		t.Fatalf("app run mounting an attaching volume: %v; want conflict", err)
	}
	e.settleVolumeAt(t, v, api.TaskVolumeAttach)

	w, err := c.AppRun(ctx, api.AppRunRequest{Image: "tiny", AllocationID: a.ID, Name: "web", Mounts: mount})
	if err != nil {
		t.Fatal(err)
	}
	before := dbSnapshot(t, e.Env)
	_, err = c.VolumeDetach(ctx, api.VolumeDetachRequest{Volume: "data"})
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), w.ID) {
		t.Fatalf("detach of a volume a workload mounts: %v; want conflict naming %s", err, w.ID)
	}
	after := dbSnapshot(t, e.Env)
	after["audit_logs"], before["audit_logs"] = "", ""
	sameSnapshot(t, "a refused volume.detach", before, after)

	if _, err := pool.Exec(ctx, `UPDATE workloads SET state = 'stopped', ended_at = $2 WHERE id = $1`, w.ID, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	j, err := c.JobCreate(ctx, api.JobCreateRequest{AllocationID: a.ID, Name: "train", Run: "true", Release: "keep", Image: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = c.VolumeDetach(ctx, api.VolumeDetachRequest{Volume: "data"}); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), j.ID) {
		t.Fatalf("detach while a job in an image runs on the allocation: %v; want conflict naming %s", err, j.ID)
	}
	if _, err := pool.Exec(ctx, `UPDATE jobs SET state = 'cancelled', ended_at = $2 WHERE id = $1`, j.ID, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	got, err := c.VolumeDetach(ctx, api.VolumeDetachRequest{Volume: "data"})
	if err != nil || got.State != api.VolumeDetaching {
		t.Fatalf("detach with its containers ended: %+v, %v; want detaching", got, err)
	}
	if _, err := c.AppRun(ctx, api.AppRunRequest{Image: "tiny", AllocationID: a.ID, Name: "late", Mounts: mount}); !errors.Is(err, api.ErrConflict) ||
		!strings.Contains(err.Error(), "being detached") {
		t.Fatalf("app run mounting a detaching volume: %v; want conflict", err)
	}
}
