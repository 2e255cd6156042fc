package e2e

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpuaas/gpuaas/hostd/workload/workloadtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestAppReadinessInDev is readiness and per-workload GPUs through the
// built binary and `gpuaas dev` with real podman (docs/apps.md,
// "Readiness", "Metering"): an HTTP app that listens after 3 s is
// starting until its probe passes, and `app run` returns it running
// (ready); one that never listens is failed at its 5 s start deadline
// with the probe's error and its last lines (`app run` exits 1), and its
// container is stopped; a workload with --gpus 0 and one with --gpus 2
// are metered 0 and 2 GPU-seconds a second by `billing usage --workload`.
func TestAppReadinessInDev(t *testing.T) {
	needPodman(t)
	dev, _ := loggedInDev(t)
	a := dev.createActive(t, "--sku", "h100-baremetal", "--gpus", "8")
	archive := filepath.Join(t.TempDir(), "wl.tar")
	tag, _ := name.NewTag("e2e/wl:latest")
	if err := tarball.WriteToFile(archive, tag, workloadtest.Image(t, "", nil)); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"image", "import", "wl", archive}, {"image", "verify", "wl"}, {"image", "promote", "wl"}} {
		if r := dev.gpuaas(t, "", args...); r.code != 0 {
			t.Fatalf("%v: exit %d %s", args, r.code, r.stderr)
		}
	}

	// Ready: running only once GET /ready answers.
	port := strconv.Itoa(freePort(t))
	var web api.Workload
	r := dev.gpuaas(t, "", "app", "run", "wl", "--alloc", a.ID, "--name", "web", "--ready-http", port+"/ready",
		"--start-deadline", "1m", "--json", "--", workloadtest.App, "http", port, "3s")
	if err := jsonOf(r.stdout, &web); err != nil || r.code != 0 || web.State != api.WorkloadRunning || web.ReadyAt == nil ||
		web.StartedAt == nil || web.ReadyAt.Sub(*web.StartedAt) < 3*time.Second {
		t.Fatalf("app run with a probe: exit %d %v %q %s; want running, ready 3s or more after its start", r.code, err, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "running once GET /ready on port "+port+" answers") {
		t.Errorf("app run's note: %q; want what it waits for", r.stderr)
	}

	// Never ready: failed at its deadline, saying why, its container
	// stopped.
	quiet := strconv.Itoa(freePort(t))
	r = dev.gpuaas(t, "", "app", "run", "wl", "--alloc", a.ID, "--name", "silent", "--ready-tcp", quiet,
		"--start-deadline", "5s", "--", workloadtest.App, "serve")
	if r.code != 1 || !strings.Contains(r.stderr, "failed: not ready after 5s: tcp connect to port "+quiet) ||
		!strings.Contains(r.stderr, "connection refused") || !strings.Contains(r.stdout, "serving as uid") {
		t.Errorf("app run of an app that never listens: exit %d %q %q; want 1, not ready, its last lines", r.code, r.stdout, r.stderr)
	}
	var list []api.Workload
	dev.gpuaasJSON(t, &list, "app", "ps", "--json")
	silent := idOf(t, list, "silent")
	var got api.Workload
	dev.gpuaasJSON(t, &got, "app", "get", silent, "--json")
	if got.State != api.WorkloadFailed || !strings.HasPrefix(got.Reason, "not ready after 5s: ") ||
		!strings.Contains(strings.Join(got.LastLines, "\n"), "serving as uid") {
		t.Errorf("app get of the workload never ready: %+v", got)
	}
	testutil.EventuallyWithin(t, time.Minute, "the not-ready workload's container to stop", func() bool {
		out, _ := exec.Command("pgrep", "-a", "-f", "gpuaas-"+silent).CombinedOutput()
		return strings.TrimSpace(string(out)) == ""
	})

	// Each workload's own GPUs are metered.
	gpus := map[string]int{}
	for _, n := range []string{"0", "2"} {
		r := dev.gpuaas(t, "", "app", "run", "wl", "--alloc", a.ID, "--name", "g"+n, "--gpus", n, "--json", "--", workloadtest.App, "count", "1", "2s")
		var w api.Workload
		if err := jsonOf(r.stdout, &w); err != nil || r.code != 0 {
			t.Fatalf("app run --gpus %s: exit %d %v %q %s", n, r.code, err, r.stdout, r.stderr)
		}
		gpus[w.ID], _ = strconv.Atoi(n)
		testutil.EventuallyWithin(t, time.Minute, "g"+n+" to end", func() bool {
			dev.gpuaasJSON(t, &w, "app", "get", w.ID, "--json")
			return api.WorkloadFinal(w.State)
		})
	}
	for id, n := range gpus {
		var usage []api.WorkloadUsage
		dev.gpuaasJSON(t, &usage, "billing", "usage", "--workload", id, "--json")
		if len(usage) != 1 || usage[0].GPUs != n || usage[0].Seconds <= 0 || usage[0].GPUSeconds != int64(n)*usage[0].Seconds {
			t.Errorf("billing usage --workload of a workload with %d GPUs: %+v; want its seconds × %d", n, usage, n)
		}
	}
}
