package volumes_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// settleAt applies the node's successful result of the volume's current
// task at now.
func (f *fixture) settleAt(t *testing.T, v api.Volume, typ string, result hostproto.VolumeTaskResult, now time.Time) {
	t.Helper()
	var taskID string
	if err := f.pool.QueryRow(context.Background(), `SELECT task_id FROM volumes WHERE id = $1`, v.ID).Scan(&taskID); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(result)
	if err := f.in(t, func(tx pgx.Tx) error {
		_, err := volumes.Settlers()[typ](context.Background(), tx, tasks.Outcome{TaskID: taskID, NodeID: f.node.ID, Type: typ,
			Result: hostproto.TaskResult{NodeID: f.node.ID, TaskID: taskID, Status: hostproto.TaskSucceeded, Result: raw}, Now: now})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// segment is one of a volume's meter segments.
type segment struct {
	size             int64
	start            time.Time
	stopped          bool
	stop             time.Time
	priceGiBMonthMin int64
}

func (f *fixture) segments(t *testing.T, volumeID string) []segment {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT size_bytes, started_at, stopped_at IS NOT NULL,
		coalesce(stopped_at, started_at), price_per_gib_month_minor FROM volume_meters WHERE volume_id = $1
		ORDER BY split_part(meter_id, '.', 2)::int`, volumeID)
	if err != nil {
		t.Fatal(err)
	}
	var out []segment
	var s segment
	if _, err := pgx.ForEachRow(rows, []any{&s.size, &s.start, &s.stopped, &s.stop, &s.priceGiBMonthMin}, func() error {
		out = append(out, s)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestVolumeMeterFollowsTheVolume: nothing is charged while the node
// makes the volume; its meter starts when it is ready, at its size and the
// catalog's price; a resize the node did ends that segment and starts one
// at the new size; asking for its removal stops it; and the accrual
// charges exactly that on the project's ledger.
func TestVolumeMeterFollowsTheVolume(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100*gib)
	ctx := context.Background()
	v, err := f.create(t, "data", 10*gib, "bm-1")
	if err != nil {
		t.Fatal(err)
	}
	if segs := f.segments(t, v.ID); len(segs) != 0 {
		t.Fatalf("segments of a volume being made: %+v; want none", segs)
	}
	ready := f.now.Add(time.Minute).Truncate(time.Microsecond)
	f.settleAt(t, v, api.TaskVolumeCreate, hostproto.VolumeTaskResult{VolumeID: v.ID, SizeBytes: 10 * gib}, ready)
	segs := f.segments(t, v.ID)
	if len(segs) != 1 || segs[0].size != 10*gib || !segs[0].start.Equal(ready) || segs[0].stopped || segs[0].priceGiBMonthMin != 10 {
		t.Fatalf("segments once ready: %+v; want 10 GiB at 10 from %v", segs, ready)
	}
	if err := f.in(t, func(tx pgx.Tx) error {
		_, _, err := volumes.Resize(ctx, tx, f.project, "data", 50*gib, ready.Add(time.Hour))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	grown := ready.Add(2 * time.Hour)
	f.settleAt(t, v, api.TaskVolumeResize, hostproto.VolumeTaskResult{VolumeID: v.ID, SizeBytes: 50 * gib}, grown)
	segs = f.segments(t, v.ID)
	if len(segs) != 2 || !segs[0].stopped || !segs[0].stop.Equal(grown) || segs[1].size != 50*gib || !segs[1].start.Equal(grown) || segs[1].stopped {
		t.Fatalf("segments after the resize: %+v; want 10 GiB up to %v, then 50 GiB", segs, grown)
	}
	removed := grown.Add(3 * time.Hour)
	if err := f.in(t, func(tx pgx.Tx) error {
		_, _, err := volumes.Remove(ctx, tx, f.project, "data", removed)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	segs = f.segments(t, v.ID)
	if len(segs) != 2 || !segs[1].stopped || !segs[1].stop.Equal(removed) {
		t.Fatalf("segments after rm: %+v; want the second stopped at %v", segs, removed)
	}
	if err := f.in(t, func(tx pgx.Tx) error {
		_, err := billing.Accrue(ctx, tx, removed.Add(time.Hour), removed.Add(time.Hour))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// 10 GiB for 2 h and 50 GiB for 3 h at 10 per GiB-month (730 h):
	// ⌊10×10×7200/2628000⌋ + ⌊10×50×10800/2628000⌋ = 0 + 2.
	us, err := billing.VolumeUsages(ctx, f.pool, f.project, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != 1 || us[0].AmountMinor != 2 || us[0].GiBHours != 10*2+50*3 || us[0].Running {
		t.Fatalf("usage %+v; want 170 GiB-hours for 2 cents, stopped", us)
	}
	bal, err := billing.Balance(ctx, f.pool, f.project)
	if err != nil || bal != -2 {
		t.Fatalf("balance %d (%v); want -2", bal, err)
	}
}
