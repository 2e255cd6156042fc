package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpuaas/gpuaas/hostd/workload/workloadtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// needPodman skips a test of workloads where they cannot run: they need
// root (the sim's users are then real accounts) and podman with runc.
func needPodman(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("workloads run as the sim's system users, which need root")
	}
	for _, tool := range []string{"podman", "runc", "usermod", "newuidmap"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
}

// TestAppsInDev is workloads' acceptance through the built binary and
// `gpuaas dev` with real podman (docs/apps.md): an image imported,
// verified and promoted runs on a bare-metal allocation (`app run` →
// running, `app ps` lists it); a command exiting 1 is failed with exit
// code 1 and its last lines; a second run of the digest on the node skips
// the pull; stop ends a workload; releasing the allocation leaves no
// container, process or subordinate id range of its user on the node;
// bad input (unknown image, unverified image, a name in use) is refused
// with nothing written.
func TestAppsInDev(t *testing.T) {
	needPodman(t)
	dev, _ := loggedInDev(t)
	a := dev.createActive(t, "--sku", "h100-baremetal", "--gpus", "8")

	// The test's image (a static program, docs/apps.md), imported into
	// the dev registry; a second one stays unverified.
	dir := t.TempDir()
	archive := func(file string, extra map[string]string) string {
		path := filepath.Join(dir, file)
		tag, _ := name.NewTag("e2e/" + file + ":latest")
		if err := tarball.WriteToFile(path, tag, workloadtest.Image(t, "", extra)); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, args := range [][]string{
		{"image", "import", "wl", archive("wl.tar", nil)},
		{"image", "verify", "wl"},
		{"image", "promote", "wl"},
		{"image", "import", "raw", archive("raw.tar", map[string]string{"etc/raw": "x"})},
	} {
		if r := dev.gpuaas(t, "", args...); r.code != 0 {
			t.Fatalf("%v: exit %d %s", args, r.code, r.stderr)
		}
	}
	workloads := func() []api.Workload {
		var list []api.Workload
		dev.gpuaasJSON(t, &list, "app", "ps", "--all", "--json")
		return list
	}

	// Bad input: refused, naming what is wrong, nothing written.
	for _, bad := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"app", "run", "ghost", "--alloc", a.ID}, 6, "no image ghost"},
		{[]string{"app", "run", "raw", "--alloc", a.ID}, 7, "unverified"},
		{[]string{"app", "run", "wl"}, 2, "--alloc"},
		{[]string{"app", "run", "wl", "--alloc", a.ID, "--name", "Bad Name"}, 7, "name"},
	} {
		if r := dev.gpuaas(t, "", bad.args...); r.code != bad.code || !strings.Contains(r.stderr, bad.says) {
			t.Errorf("%v: exit %d %q; want %d naming %q", bad.args, r.code, r.stderr, bad.code, bad.says)
		}
	}
	if n := len(workloads()); n != 0 {
		t.Fatalf("%d workloads after refused runs; want 0", n)
	}

	// Runs: the first start on the node pulls the image.
	var web api.Workload
	r := dev.gpuaas(t, "", "app", "run", "wl", "--alloc", a.ID, "--name", "web", "-e", "GREETING=hi", "--json",
		"--", workloadtest.App, "serve")
	if err := jsonOf(r.stdout, &web); err != nil || r.code != 0 || web.State != api.WorkloadRunning || !web.Pulled {
		t.Fatalf("app run: exit %d %v %q %s; want running, pulled", r.code, err, r.stdout, r.stderr)
	}
	if r := dev.gpuaas(t, "", "app", "ps"); r.code != 0 || !strings.Contains(r.stdout, web.ID+"\tweb\twl\trunning\t") {
		t.Errorf("app ps: exit %d %q", r.code, r.stdout)
	}
	if r := dev.gpuaas(t, "", "app", "run", "wl", "--alloc", a.ID, "--name", "web"); r.code != 8 || !strings.Contains(r.stderr, `name "web" is in use`) {
		t.Errorf("a name in use: exit %d %q; want 8", r.code, r.stderr)
	}

	// A command that exits 1: failed, exit code 1, its last lines; the
	// digest was on the node already.
	r = dev.gpuaas(t, "", "app", "run", "wl", "--alloc", a.ID, "--name", "fail", "--", workloadtest.App, "exit", "1")
	if r.code != 1 || !strings.Contains(r.stderr, "failed: exited with 1") || !strings.Contains(r.stdout, "line 3 of a workload that exits 1") {
		t.Errorf("app run of a failing command: exit %d %q %q; want 1 with its last lines", r.code, r.stdout, r.stderr)
	}
	var failed api.Workload
	dev.gpuaasJSON(t, &failed, "app", "get", idOf(t, workloads(), "fail"), "--json")
	if failed.State != api.WorkloadFailed || failed.ExitCode == nil || *failed.ExitCode != 1 || failed.Pulled ||
		len(failed.LastLines) != 3 {
		t.Errorf("app get of the failed workload: %+v; want failed, exit 1, three lines, not pulled", failed)
	}
	if r := dev.gpuaas(t, "", "app", "logs", web.ID); r.code != 0 || !strings.Contains(r.stdout, "GREETING=hi") {
		t.Errorf("app logs: exit %d %q", r.code, r.stdout)
	}

	// Stop ends it (SIGTERM: the program exits by itself).
	if r := dev.gpuaas(t, "", "app", "stop", web.ID); r.code != 0 {
		t.Fatalf("app stop: exit %d %s", r.code, r.stderr)
	}
	testutil.EventuallyWithin(t, time.Minute, "web to be stopped", func() bool {
		var w api.Workload
		dev.gpuaasJSON(t, &w, "app", "get", web.ID, "--json")
		return w.State == api.WorkloadStopped
	})
	// Its whole log, followed to its end: from the first line to the one
	// it printed after SIGTERM (app logs -f returns once it ended).
	if r := dev.gpuaas(t, "", "app", "logs", "-f", web.ID); r.code != 0 || !strings.Contains(r.stdout, "GREETING=hi") ||
		!strings.Contains(r.stdout, "got SIGTERM") {
		t.Errorf("app logs -f of the stopped workload: exit %d %q %q", r.code, r.stdout, r.stderr)
	}

	// A counter followed live with app logs -f: every line once, in
	// order, on its stream, and -f returns at the workload's end.
	r = dev.gpuaas(t, "", "app", "run", "wl", "--alloc", a.ID, "--name", "count", "-d", "--", workloadtest.App, "count", "60", "50ms")
	if r.code != 0 {
		t.Fatalf("app run count: exit %d %s", r.code, r.stderr)
	}
	r = dev.gpuaas(t, "", "app", "logs", "-f", strings.TrimSpace(r.stdout), "--json", "seq,stream,text")
	if r.code != 0 {
		t.Fatalf("app logs -f of the counter: exit %d %s", r.code, r.stderr)
	}
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	for i := 1; i <= 60; i++ {
		var l api.LogLine
		stream := api.LogStdout
		if i%4 == 0 {
			stream = api.LogStderr
		}
		if err := dec.Decode(&l); err != nil || l.Seq != int64(i) || l.Text != fmt.Sprintf("n %d", i) || l.Stream != stream {
			t.Fatalf("line %d of the counter: %+v, %v; want n %d on %s (output %q)", i, l, err, i, stream, r.stdout)
		}
	}
	if dec.More() {
		t.Errorf("more than 60 lines: %q", r.stdout)
	}

	// A running workload at release: nothing of the user stays.
	r = dev.gpuaas(t, "", "app", "run", "wl", "--alloc", a.ID, "--name", "last", "--json", "--", workloadtest.App, "serve")
	var last api.Workload
	if err := jsonOf(r.stdout, &last); err != nil || last.State != api.WorkloadRunning {
		t.Fatalf("app run last: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	user := api.PosixUser(a.ID)
	if !strings.Contains(readFile(t, "/etc/subuid"), user+":") {
		t.Fatalf("/etc/subuid has no range of %s while it runs workloads", user)
	}
	if r := dev.gpuaas(t, "", "alloc", "release", a.ID, "--wait"); r.code != 0 {
		t.Fatalf("alloc release: exit %d %s", r.code, r.stderr)
	}
	if strings.Contains(readFile(t, "/etc/subuid"), user+":") || strings.Contains(readFile(t, "/etc/subgid"), user+":") {
		t.Errorf("the released user %s still has subordinate ids", user)
	}
	if out, err := exec.Command("id", user).CombinedOutput(); err == nil {
		t.Errorf("the released user still exists: %s", out)
	}
	if out, _ := exec.Command("pgrep", "-a", "-f", "gpuaas-"+last.ID).CombinedOutput(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("processes of the released workload's container:\n%s", out)
	}
	testutil.EventuallyWithin(t, time.Minute, "the released allocation's workload to be stopped", func() bool {
		var w api.Workload
		dev.gpuaasJSON(t, &w, "app", "get", last.ID, "--json")
		return w.State == api.WorkloadStopped
	})
}

func idOf(t *testing.T, list []api.Workload, name string) string {
	t.Helper()
	for _, w := range list {
		if w.Name == name && w.RemovedAt == nil {
			return w.ID
		}
	}
	t.Fatalf("no workload %s in %+v", name, list)
	return ""
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func jsonOf(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// BenchmarkAppRunCached is `app run` → running with the image already in
// the node's cache and the user's storage (bench/goals.json): each op
// runs a new workload of the same digest on one active bare-metal
// allocation, timed from the request until app.get says running; it is
// stopped and removed untimed.
func BenchmarkAppRunCached(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("workloads run as the sim's system users, which need root")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		b.Skip("no podman")
	}
	data, cfg := tempDirTB(b, "gpuaas-bench-data-"), tempDirTB(b, "gpuaas-bench-cfg-")
	pw := filepath.Join(cfg, "pw")
	if err := os.WriteFile(pw, []byte(devPassword+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	dev := startDevBin(b, binary, data, cfg, "--password-file", pw, "--log-level", "warn")
	if r := dev.gpuaas(b, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		b.Fatalf("login exited %d: %s", r.code, r.stderr)
	}
	file := filepath.Join(cfg, "wl.tar")
	tag, _ := name.NewTag("e2e/wl:latest")
	if err := tarball.WriteToFile(file, tag, workloadtest.Image(b, "", nil)); err != nil {
		b.Fatal(err)
	}
	for _, args := range [][]string{{"image", "import", "wl", file}, {"image", "verify", "wl"}, {"image", "promote", "wl"}} {
		if r := dev.gpuaas(b, "", args...); r.code != 0 {
			b.Fatalf("%v: exit %d %s", args, r.code, r.stderr)
		}
	}
	client := benchClient(b, cfg)
	ctx := context.Background()
	a, err := client.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		b.Fatal(err)
	}
	until := func(what string, done func() bool) {
		for deadline := time.Now().Add(2 * time.Minute); !done(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("waited 2m for %s", what)
			}
		}
	}
	until("the allocation to be active", func() bool {
		got, err := client.AllocGet(ctx, a.ID)
		return err == nil && got.State == api.AllocActive
	})
	run := func(i int) (time.Duration, *api.Workload) {
		start := time.Now()
		w, err := client.AppRun(ctx, api.AppRunRequest{Image: "wl", AllocationID: a.ID, Name: fmt.Sprintf("b%d", i),
			Command: []string{workloadtest.App, "serve"}})
		if err != nil {
			b.Fatal(err)
		}
		until("the workload to run", func() bool {
			got, err := client.AppGet(ctx, w.ID)
			if err == nil && api.WorkloadFinal(got.State) {
				b.Fatalf("workload %s ended: %s", got.ID, got.Reason)
			}
			w = got
			return err == nil && got.State == api.WorkloadRunning
		})
		return time.Since(start), w
	}
	remove := func(w *api.Workload) {
		if _, err := client.AppRm(ctx, w.ID); err != nil {
			b.Fatal(err)
		}
		until("the workload to stop", func() bool {
			got, err := client.AppGet(ctx, w.ID)
			return err == nil && api.WorkloadFinal(got.State)
		})
	}
	first, w := run(-1) // pulls into the node's cache and the user's storage
	if !w.Pulled {
		b.Fatalf("the first run did not pull: %+v", w)
	}
	remove(w)
	// The baseline: a bare `podman run -d` of the same image as the
	// allocation's user on this machine, as hostd's own last step is.
	user := api.PosixUser(a.ID)
	// runuser is no session of hostd's: podman keeps its runtime
	// directories in the node's own /tmp, removed here.
	if uid := fieldOf(b, user, 2); uid != "" {
		b.Cleanup(func() {
			_ = os.RemoveAll("/tmp/podman-run-" + uid)
			_ = os.RemoveAll("/tmp/containers-user-" + uid)
		})
	}
	podman := func(args ...string) string {
		out, err := exec.Command("runuser", append([]string{"-u", user, "--", "env", "HOME=" + fieldOf(b, user, 5), "podman", "--runtime", "runc"}, args...)...).Output()
		if err != nil {
			b.Fatalf("podman %v as %s: %v", args, user, err)
		}
		return strings.TrimSpace(string(out))
	}
	imageID := podman("images", "-q")
	var bare []time.Duration
	for i := range 5 {
		start := time.Now()
		podman("run", "-d", "--network", "host", "--name", fmt.Sprintf("bare%d", i), imageID, workloadtest.App, "serve")
		bare = append(bare, time.Since(start))
		podman("rm", "-f", "-t", "0", fmt.Sprintf("bare%d", i))
	}
	slices.Sort(bare)
	var took []time.Duration
	b.ResetTimer()
	for i := range b.N {
		d, w := run(i)
		took = append(took, d)
		b.StopTimer()
		if w.Pulled {
			b.Fatalf("run %d pulled again", i)
		}
		remove(w)
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
	b.ReportMetric(ms(took[len(took)*99/100]), "p99-ms")
	b.ReportMetric(ms(first), "first-run-ms")
	b.ReportMetric(ms(bare[len(bare)/2]), "podman-run-p50-ms")
}

// fieldOf is field i of user's passwd(5) line (2 its uid, 5 its home);
// "" once the user is gone.
func fieldOf(b *testing.B, user string, i int) string {
	b.Helper()
	out, _ := exec.Command("getent", "passwd", user).Output()
	f := strings.Split(strings.TrimSpace(string(out)), ":")
	if len(f) < 7 {
		return ""
	}
	return f[i]
}
