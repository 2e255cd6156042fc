package app

import (
	"context"
	"slices"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestManifestMounts: a manifest's mounts reach app.run's request as
// they are (controld checks each volume is attached to the allocation);
// with --sku the allocation is rented with their volumes, at their
// default paths, so that they are attached to it.
func TestManifestMounts(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	var got *RunOptions
	capture := func(_ context.Context, o *RunOptions) error { got = o; return nil }
	path := writeManifest(t, "name: web\nimage: tiny\nmounts:\n  - {volume: data, path: /work}\n  - {volume: models, path: /models, read_only: true}\n")
	if err := cmdtest.Execute(NewCmdRun(cmdtest.Factory(ios), capture), "-f", path, "--alloc", "a-1"); err != nil {
		t.Fatal(err)
	}
	want := []api.AppMount{{Volume: "data", Path: "/work"}, {Volume: "models", Path: "/models", ReadOnly: true}}
	if !slices.Equal(got.Mounts, want) {
		t.Errorf("mounts %+v; want %+v", got.Mounts, want)
	}
	if vols := rentVolumes(got.Mounts); !slices.Equal(vols, []api.VolumeMount{{Volume: "data"}, {Volume: "models"}}) {
		t.Errorf("volumes rented with --sku: %+v; want data and models at their default paths", vols)
	}
}
