package tasks_test

import (
	"errors"
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/volume"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestVolumeTasks: create, resize and delete through the registry on a
// sim host, whose volumes are real ext4 images (as root); the health
// probe reports the room left, which a volume's creation takes.
func TestVolumeTasks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("volumes need root")
	}
	t.Parallel()
	_, env := simHost(t, sim.H100Baremetal8())
	if env.Volumes == nil {
		t.Fatal("a sim host run as root keeps no volumes")
	}
	res, _, err := run(t, env, api.TaskVolumeCreate, hostproto.VolumeTaskParams{VolumeID: "vol-t1", SizeBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	r := res.(hostproto.VolumeTaskResult)
	if r.VolumeID != "vol-t1" || r.SizeBytes != 32<<20 || r.FSSize != 32<<20 || r.FreeBytes <= 0 {
		t.Fatalf("create result %+v", r)
	}
	// A retried create finds it made.
	if _, _, err := run(t, env, api.TaskVolumeCreate, hostproto.VolumeTaskParams{VolumeID: "vol-t1", SizeBytes: 32 << 20}); err != nil {
		t.Fatalf("retried create: %v", err)
	}
	probe, err := tasks.ProbeHealth(env)
	if err != nil || probe.VolumeFreeBytes == nil {
		t.Fatalf("health probe: %+v, %v; want the room for volumes", probe, err)
	}
	if probe.Volumes == nil || len(*probe.Volumes) != 1 || (*probe.Volumes)[0] != "vol-t1" {
		t.Fatalf("health probe's volumes %v; want vol-t1", probe.Volumes)
	}
	res, _, err = run(t, env, api.TaskVolumeResize, hostproto.VolumeTaskParams{VolumeID: "vol-t1", SizeBytes: 48 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.(hostproto.VolumeTaskResult); r.SizeBytes != 48<<20 || r.FSSize != 48<<20 {
		t.Fatalf("resize result %+v; want 48 MiB", r)
	}
	_, _, err = run(t, env, api.TaskVolumeResize, hostproto.VolumeTaskParams{VolumeID: "vol-t1", SizeBytes: 32 << 20})
	var pe *tasks.PhaseError
	if !errors.Is(err, volume.ErrShrink) || !errors.As(err, &pe) || pe.Phase != tasks.PhaseVolumeResize {
		t.Fatalf("shrink: %v; want ErrShrink in phase %s", err, tasks.PhaseVolumeResize)
	}
	if _, _, err := run(t, env, api.TaskVolumeDelete, hostproto.VolumeTaskParams{VolumeID: "vol-t1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Volumes.Stat(t.Context(), "vol-t1"); !errors.Is(err, volume.ErrNotFound) {
		t.Fatalf("stat after delete: %v; want ErrNotFound", err)
	}
	if _, _, err := run(t, env, api.TaskVolumeDelete, hostproto.VolumeTaskParams{VolumeID: "vol-t1"}); err != nil {
		t.Fatalf("retried delete: %v", err)
	}
}

// TestVolumeTaskRefusals: bad params fail before any phase; a node
// without volumes says so.
func TestVolumeTaskRefusals(t *testing.T) {
	t.Parallel()
	_, env := simHost(t, sim.H100Baremetal8())
	for _, tc := range []struct {
		name string
		typ  string
		p    hostproto.VolumeTaskParams
	}{
		{"path as id", api.TaskVolumeCreate, hostproto.VolumeTaskParams{VolumeID: "../etc", SizeBytes: 32 << 20}},
		{"no id", api.TaskVolumeDelete, hostproto.VolumeTaskParams{}},
		{"zero size", api.TaskVolumeCreate, hostproto.VolumeTaskParams{VolumeID: "vol-x", SizeBytes: 0}},
		{"odd size", api.TaskVolumeResize, hostproto.VolumeTaskParams{VolumeID: "vol-x", SizeBytes: 32<<20 + 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rec, err := run(t, env, tc.typ, tc.p)
			if !errors.Is(err, tasks.ErrInvalidParams) {
				t.Fatalf("got %v; want ErrInvalidParams", err)
			}
			if len(rec.events) != 0 {
				t.Fatalf("phases ran: %v", rec.events)
			}
		})
	}
	env.Volumes = nil
	if _, _, err := run(t, env, api.TaskVolumeCreate, hostproto.VolumeTaskParams{VolumeID: "vol-x", SizeBytes: 32 << 20}); !errors.Is(err, tasks.ErrNoVolumes) {
		t.Fatalf("create on a node without volumes: %v; want ErrNoVolumes", err)
	}
}
