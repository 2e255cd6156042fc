package controld_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestVolumeAttachNeedsFunds: attaching a volume to a running allocation
// of a depleted project is refused with insufficient_funds, as an alloc
// create with the volume would be, writing only its refusal's audit row
// (the volume stays ready, no task); funded again, the same attach goes
// ahead, through the API, and alloc.get lists the volume attaching.
func TestVolumeAttachNeedsFunds(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute})
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	e.credit(t, 1000)
	a := e.activate(t, c, "h200-slice", 2)
	if err := node.SetHealth(ctx, e.Server.Pool(), a.NodeID, json.RawMessage(`{"slice_volumes":true,"volume_free_bytes":107374182400}`),
		"", "", e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	v, err := c.VolumeCreate(ctx, api.VolumeCreateRequest{Name: "data", Size: "1G", Node: a.NodeID})
	if err != nil {
		t.Fatal(err)
	}
	e.settleVolumeAt(t, v, api.TaskVolumeCreate)
	e.clock.Advance(time.Second)
	e.credit(t, -1000)

	before := dbSnapshot(t, e.Env)
	_, err = c.VolumeAttach(ctx, api.VolumeAttachRequest{Volume: "data", Allocation: a.ID})
	if !errors.Is(err, api.ErrInsufficientFunds) {
		t.Fatalf("attach in a depleted project: %v; want insufficient_funds", err)
	}
	after := dbSnapshot(t, e.Env)
	after["audit_logs"], before["audit_logs"] = "", ""
	sameSnapshot(t, "a refused volume.attach", before, after)
	var refusals int
	if err := e.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_logs WHERE action = 'volume.attach_refused'`).Scan(&refusals); err != nil || refusals != 1 {
		t.Fatalf("refusal audit rows: %d, %v; want 1", refusals, err)
	}

	e.clock.Advance(time.Second)
	e.credit(t, 1000)
	got, err := c.VolumeAttach(ctx, api.VolumeAttachRequest{Volume: "data", Allocation: a.ID, Path: "/models/data"})
	if err != nil || got.State != api.VolumeAttaching || got.AllocationID != a.ID || got.MountPath != "/models/data" {
		t.Fatalf("funded attach: %+v, %v; want attaching", got, err)
	}
	ag, err := c.AllocGet(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ag.Volumes) != 1 || ag.Volumes[0].Name != "data" || ag.Volumes[0].Path != "/models/data" || ag.Volumes[0].State != api.VolumeAttaching {
		t.Fatalf("alloc get volumes %+v; want data attaching at /models/data", ag.Volumes)
	}
	if _, err := c.VolumeDetach(ctx, api.VolumeDetachRequest{Volume: "data"}); !errors.Is(err, api.ErrConflict) ||
		!strings.Contains(err.Error(), "being attached") {
		t.Fatalf("detach while attaching: %v; want conflict", err)
	}
}
