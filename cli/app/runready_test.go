package app

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestRunReadinessGPUsAndShm: a manifest's readiness probe, gpus: 0 and
// shm_size reach app.run's request; --ready-http/--ready-tcp and
// --start-deadline win over the manifest's probe; --gpus 0 is a container
// without GPUs; bad flags are usage errors naming them.
func TestRunReadinessGPUsAndShm(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)
	var got *RunOptions
	capture := func(_ context.Context, o *RunOptions) error { got = o; return nil }
	path := writeManifest(t, `name: web
image: tiny
ports: [{name: api, port: 8080}]
gpus: 0
shm_size: 512Mi
readiness: {port: api, http: /health, start_deadline: 2m}
`)
	if err := cmdtest.Execute(NewCmdRun(f, capture), "-f", path, "--alloc", "a-1"); err != nil {
		t.Fatal(err)
	}
	want := api.WorkloadProbe{Port: 8080, HTTPPath: "/health", StartDeadline: 2 * time.Minute}
	if got.Readiness == nil || *got.Readiness != want || !got.NoGPUs || got.GPUs != 0 || got.ShmBytes != 512<<20 {
		t.Errorf("from the manifest: %+v (probe %+v); want probe %+v, no GPUs, 512Mi shm", got, got.Readiness, want)
	}
	if err := cmdtest.Execute(NewCmdRun(f, capture), "-f", path, "--alloc", "a-1", "--ready-tcp", "9000", "--gpus", "1"); err != nil {
		t.Fatal(err)
	}
	if want := (api.WorkloadProbe{Port: 9000, StartDeadline: 5 * time.Minute}); got.Readiness == nil || *got.Readiness != want || got.NoGPUs || got.GPUs != 1 {
		t.Errorf("--ready-tcp 9000 --gpus 1 over the manifest: %+v (probe %+v); want probe %+v, 1 GPU", got, got.Readiness, want)
	}
	if err := cmdtest.Execute(NewCmdRun(f, capture), "tiny", "--alloc", "a-1", "--ready-http", "8080/ready", "--start-deadline", "30s", "--gpus", "0"); err != nil {
		t.Fatal(err)
	}
	if want := (api.WorkloadProbe{Port: 8080, HTTPPath: "/ready", StartDeadline: 30 * time.Second}); got.Readiness == nil || *got.Readiness != want || !got.NoGPUs {
		t.Errorf("--ready-http 8080/ready --start-deadline 30s --gpus 0: %+v (probe %+v); want probe %+v, no GPUs", got, got.Readiness, want)
	}
	if err := cmdtest.Execute(NewCmdRun(f, capture), "tiny", "--alloc", "a-1"); err != nil || got.Readiness != nil || got.NoGPUs {
		t.Errorf("no probe flags: %+v, %v; want no probe, all GPUs", got, err)
	}
	for _, tt := range []struct {
		args []string
		says string
	}{
		{[]string{"--ready-http", "80/ready"}, "--ready-http"},
		{[]string{"--ready-http", "web/ready"}, "--ready-http"},
		{[]string{"--ready-tcp", "70000"}, "--ready-tcp"},
		{[]string{"--ready-tcp", "8080", "--ready-http", "8080/"}, "together"},
		{[]string{"--start-deadline", "1m"}, "without a probe"},
		{[]string{"--ready-tcp", "8080", "--start-deadline", "0s"}, "--start-deadline"},
		{[]string{"--ready-tcp", "8080", "--start-deadline", "2h"}, "--start-deadline"},
	} {
		got = nil
		cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdRun(f, capture), append([]string{"tiny", "--alloc", "a-1"}, tt.args...)...), tt.says)
		if got != nil {
			t.Errorf("%v: the run went ahead", tt.args)
		}
	}
}
