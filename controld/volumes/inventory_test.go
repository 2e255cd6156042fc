package volumes_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestNodeBackWithoutVolumeFailsIt: a node whose report no longer lists
// a ready volume fails it with the reason, tells the project, and stops
// its meter; a report without a list, a volume the report lists, one
// made moments before the report, and another node's volume are left
// alone.
func TestNodeBackWithoutVolumeFailsIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100*gib)
	ctx := context.Background()
	ready := f.now.Add(time.Minute).Truncate(time.Microsecond)
	newVolume := func(name string, at time.Time) api.Volume {
		v, err := f.create(t, name, gib, "bm-1")
		if err != nil {
			t.Fatal(err)
		}
		f.settleAt(t, v, api.TaskVolumeCreate, hostproto.VolumeTaskResult{VolumeID: v.ID, SizeBytes: gib}, at)
		return v
	}
	lost, kept := newVolume("lost", ready), newVolume("kept", ready)
	report := ready.Add(time.Hour)
	fresh := newVolume("fresh", report.Add(-30*time.Second)) // made after the probe the report carries, maybe
	check := func(health string) int {
		t.Helper()
		var n int
		if err := f.in(t, func(tx pgx.Tx) error {
			evs, err := volumes.CheckInventory(ctx, tx, f.node.ID, json.RawMessage(health), report)
			n = len(evs)
			for _, ev := range evs {
				if ev.Kind != api.EventVolume || ev.ProjectID != f.project || len(ev.Users) != 1 || ev.Users[0] != f.user {
					t.Errorf("event %+v; want a volume event to the project's member", ev)
				}
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := check(`{"kernel":"6.1"}`); n != 0 {
		t.Fatalf("a report without a volume list failed %d volumes", n)
	}
	if n := check(`{"volumes":["` + kept.ID + `"]}`); n != 1 {
		t.Fatalf("the report without %s failed %d volumes; want 1", lost.ID, n)
	}
	got := f.get(t, lost.ID)
	if got.State != api.VolumeFailed || !strings.Contains(got.Reason, "reported it missing") {
		t.Fatalf("lost volume %+v; want failed with the reason", got)
	}
	for _, v := range []api.Volume{kept, fresh} {
		if got := f.get(t, v.ID); got.State != api.VolumeReady {
			t.Errorf("volume %s is %s; want ready", got.Name, got.State)
		}
	}
	us, err := billing.VolumeUsages(ctx, f.pool, f.project, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		if running := u.VolumeID != lost.ID; u.Running != running {
			t.Errorf("volume %s running %v; want %v", u.VolumeID, u.Running, running)
		}
		if u.VolumeID == lost.ID && (u.StoppedAt == nil || !u.StoppedAt.Equal(report)) {
			t.Errorf("lost volume's meter stopped at %v; want %v", u.StoppedAt, report)
		}
	}
	if n := check(`{"volumes":[]}`); n != 1 {
		t.Errorf("a second report failed %d volumes; want kept only (lost is failed already, fresh too new)", n)
	}
}
