package volumes_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestNodeReportEndsLostSessions: a session hold older than the grace
// whose volume the node's report does not list as in a session ends
// (ready, its event, the session's key returned for the audit); a report
// without the list, a hold the report lists and one made moments before
// the report are left alone.
func TestNodeReportEndsLostSessions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100*gib)
	ctx := context.Background()
	ready := f.now.Add(time.Minute).Truncate(time.Microsecond)
	report := ready.Add(time.Hour)
	held := func(name string, since time.Time) api.Volume {
		v, err := f.create(t, name, gib, "bm-1")
		if err != nil {
			t.Fatal(err)
		}
		f.settleAt(t, v, api.TaskVolumeCreate, hostproto.VolumeTaskResult{VolumeID: v.ID, SizeBytes: gib}, ready)
		if err := f.in(t, func(tx pgx.Tx) error {
			_, _, err := volumes.OpenSession(ctx, tx, v.ID, f.user, "SHA256:"+name, since)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return v
	}
	lost, kept := held("lost", report.Add(-time.Hour)), held("kept", report.Add(-time.Hour))
	fresh := held("fresh", report.Add(-30*time.Second)) // the node may not have mounted it yet
	check := func(health string) []volumes.LostSession {
		t.Helper()
		var got []volumes.LostSession
		if err := f.in(t, func(tx pgx.Tx) error {
			var err error
			got, err = volumes.EndLostSessions(ctx, tx, f.node.ID, json.RawMessage(health), report)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := check(`{"volumes":[]}`); len(got) != 0 {
		t.Fatalf("a report without a session list ended %d holds", len(got))
	}
	got := check(`{"volume_sessions":["` + kept.ID + `"]}`)
	if len(got) != 1 || got[0].Volume.ID != lost.ID || got[0].Key != "SHA256:lost" || got[0].Volume.Session == nil ||
		got[0].Volume.Session.UserID != f.user || got[0].Event.Kind != api.EventVolume {
		t.Fatalf("ended %+v; want lost's hold (with its key, user and event)", got)
	}
	if v := f.get(t, lost.ID); v.State != api.VolumeReady || v.Session != nil {
		t.Fatalf("lost volume %+v; want ready", v)
	}
	for _, v := range []api.Volume{kept, fresh} {
		if got := f.get(t, v.ID); got.State != api.VolumeAttached || got.Session == nil {
			t.Errorf("volume %s %+v; want still held", v.Name, got)
		}
	}
	if got := check(`{"volume_sessions":["` + kept.ID + `"]}`); len(got) != 0 {
		t.Errorf("the same report again ended %d holds; want none", len(got))
	}
}
