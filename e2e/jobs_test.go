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

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestJobsInDev is the first slice of jobs' acceptance (docs/jobs.md) with
// the built binary and `gpuaas dev`: on an active bare-metal allocation,
// `gpuaas run -f job.yaml` with `run: exit 7` exits 7; `run: echo hello`
// prints hello (the end of its output, once it ended: not streamed yet)
// and exits 0; a setup that fails ends the job at setup with its code and
// its output; `release: on-exit` leaves the allocation
// released with reason "job finished", `keep` leaves it active; a job
// past its timeout exits 125 with the reason; a detached job is followed
// again with `job wait`, and `job cancel` ends it; `ssh gpuaas-dev run -f - < job.yaml` works with only OpenSSH;
// resources.sku rents the allocation and releases it after; bad job.yaml
// and an unknown SKU are refused naming the field, before anything is
// created.
func TestJobsInDev(t *testing.T) {
	dev, cfg := loggedInDev(t)
	a := dev.createActive(t, "--sku", "h100-baremetal", "--gpus", "8")
	spec := func(run, release string, extra ...string) string {
		return fmt.Sprintf("resources:\n  allocation: %s\nrun: %q\nrelease: %s\n%s", a.ID, run, release, strings.Join(extra, ""))
	}
	jobs := func() int {
		var list []api.Job
		dev.gpuaasJSON(t, &list, "job", "list", "--json")
		return len(list)
	}

	// Bad input: refused with the field named, nothing created.
	for _, bad := range []struct{ text, want string }{
		{"resources: {allocation: " + a.ID + "}\nrn: exit 0\n", "rn: unknown key"},
		{"resources: {allocation: " + a.ID + "}\n", "run: required"},
		{"resources: {allocation: " + a.ID + "}\nrun: x\nrelease: never\n", "release"},
	} {
		r := dev.gpuaas(t, bad.text, "run", "-f", "-")
		if r.code != 2 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("run %q: exit %d %q; want 2 naming %q", bad.text, r.code, r.stderr, bad.want)
		}
	}
	if r := dev.gpuaas(t, "resources: {allocation: a-000000000000}\nrun: x\n", "run", "-f", "-"); r.code != 6 {
		t.Errorf("run on an unknown allocation: exit %d %q; want 6 (not_found)", r.code, r.stderr)
	}
	if n := jobs(); n != 0 {
		t.Fatalf("%d jobs after refused runs; want 0", n)
	}

	// The job's own exit code, and setup's.
	if r := dev.gpuaas(t, spec("exit 7", "keep"), "run", "-f", "-"); r.code != 7 || !strings.Contains(r.stderr, "exited with 7") {
		t.Errorf("run exit 7: exit %d %q; want 7", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, spec("echo hello", "keep", "setup: echo preparing; exit 3\n"), "run", "-f", "-"); r.code != 3 ||
		!strings.Contains(r.stderr, "setup exited with 3") || r.stdout != "preparing\n" {
		t.Errorf("run with a failing setup: exit %d %q %q; want 3 at setup, with its output", r.code, r.stdout, r.stderr)
	}
	if r := dev.gpuaas(t, spec(`test "$GREETING" = hello && echo hello`, "keep", "env: {GREETING: hello}\n"), "run", "-f", "-"); r.code != 0 || r.stdout != "hello\n" {
		t.Errorf("run echo hello: exit %d %q %q; want 0 printing hello", r.code, r.stdout, r.stderr)
	}
	var alloc api.Allocation
	dev.gpuaasJSON(t, &alloc, "alloc", "get", a.ID, "--json")
	if alloc.State != api.AllocActive {
		t.Fatalf("release: keep left the allocation %s; want active", alloc.State)
	}

	// A job longer than its timeout ends with the timeout reason and the
	// platform's exit code.
	if r := dev.gpuaas(t, spec("sleep 60", "keep", "timeout: 1s\n"), "run", "-f", "-"); r.code != 125 || !strings.Contains(r.stderr, "timeout") {
		t.Errorf("run past its timeout: exit %d %q; want 125 with the timeout reason", r.code, r.stderr)
	}

	// Detached, followed again, cancelled.
	r := dev.gpuaas(t, spec("sleep 300", "keep"), "run", "-f", "-", "--detach")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(id, "j-") {
		t.Fatalf("run --detach: exit %d %q %q; want a job id", r.code, r.stdout, r.stderr)
	}
	testutil.EventuallyWithin(t, time.Minute, "the detached job to run", func() bool {
		var j api.Job
		dev.gpuaasJSON(t, &j, "job", "get", id, "--json")
		return j.State == api.JobRunning
	})
	if r := dev.gpuaas(t, "", "job", "cancel", id); r.code != 0 {
		t.Fatalf("job cancel: exit %d %q", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "job", "wait", id); r.code != 128+15 || !strings.Contains(r.stderr, "cancelled") {
		t.Errorf("job wait of a cancelled job: exit %d %q; want 143 (SIGTERM), cancelled", r.code, r.stderr)
	}

	// Over SSH, with nothing installed but OpenSSH: `ssh gpuaas-dev run -f - < job.yaml`.
	if r := dev.gpuaas(t, "", "ssh-config"); r.code != 0 {
		t.Fatalf("ssh-config: exit %d %s", r.code, r.stderr)
	}
	ssh := exec.Command("ssh", "-F", filepath.Join(cfg, "ssh", "dev", "config"), "-o", "BatchMode=yes", "gpuaas-dev", "run", "-f", "-")
	ssh.Stdin = strings.NewReader(spec("echo over ssh; exit 7", "keep"))
	var sshOut, sshErr strings.Builder
	ssh.Stdout, ssh.Stderr = &sshOut, &sshErr
	if err := ssh.Run(); ssh.ProcessState == nil || ssh.ProcessState.ExitCode() != 7 || sshOut.String() != "over ssh\n" {
		t.Errorf("ssh gpuaas-dev run -f -: %v, %q %q; want exit 7 printing 'over ssh'", err, sshOut.String(), sshErr.String())
	}

	// release: on-exit releases the allocation with reason "job finished".
	if r := dev.gpuaas(t, spec("true", "on-exit"), "run", "-f", "-"); r.code != 0 {
		t.Fatalf("run on-exit: exit %d %q", r.code, r.stderr)
	}
	testutil.EventuallyWithin(t, time.Minute, "the allocation to be released", func() bool {
		dev.gpuaasJSON(t, &alloc, "alloc", "get", a.ID, "--json")
		return alloc.State == api.AllocReleased
	})
	if alloc.Reason != api.JobReleaseReason {
		t.Errorf("released with reason %q; want %q", alloc.Reason, api.JobReleaseReason)
	}
	if n := jobs(); n != 7 {
		t.Errorf("job list shows %d jobs; want 7", n)
	}

	// resources.sku rents the allocation, runs the job on it and (on-exit)
	// releases it; an unknown SKU is refused before anything is created.
	var allocs []api.Allocation
	dev.gpuaasJSON(t, &allocs, "alloc", "list", "--all", "--json")
	if r := dev.gpuaas(t, "resources: {sku: no-such-sku}\nrun: x\n", "run", "-f", "-"); r.code == 0 || !strings.Contains(r.stderr, "no-such-sku") {
		t.Errorf("run on an unknown SKU: exit %d %q; want refused naming it", r.code, r.stderr)
	}
	r = dev.gpuaas(t, "resources: {sku: h100-baremetal, gpus: 8}\nrun: echo rented\n", "run", "-f", "-")
	if r.code != 0 || r.stdout != "rented\n" || !strings.Contains(r.stderr, "per hour") {
		t.Fatalf("run on a rented allocation: exit %d %q %q; want 0 printing 'rented' after the price", r.code, r.stdout, r.stderr)
	}
	var after []api.Allocation
	dev.gpuaasJSON(t, &after, "alloc", "list", "--all", "--json")
	if len(after) != len(allocs)+1 {
		t.Fatalf("%d allocations after the run; want %d (one rented, none for the unknown SKU)", len(after), len(allocs)+1)
	}
	var list []api.Job
	dev.gpuaasJSON(t, &list, "job", "list", "--json")
	rentedID := list[0].AllocationID
	testutil.EventuallyWithin(t, time.Minute, "the rented allocation to be released", func() bool {
		dev.gpuaasJSON(t, &alloc, "alloc", "get", rentedID, "--json")
		return alloc.State == api.AllocReleased && alloc.Reason == api.JobReleaseReason
	})
}

// BenchmarkJobSubmitToRunning measures job.create → the job running on an
// allocation that is already active (`gpuaas dev` with its sim hosts, an
// API client in this process polling job.get every 30 ms, under the
// per-user API rate limit): the p50 and
// p99 in ms. Each job is cancelled and waited for before the next.
func BenchmarkJobSubmitToRunning(b *testing.B) {
	data, cfg := tempDirTB(b, "gpuaas-bench-data-"), tempDirTB(b, "gpuaas-bench-cfg-")
	pw := filepath.Join(cfg, "pw")
	if err := os.WriteFile(pw, []byte(devPassword+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	dev := startDevBin(b, binary, data, cfg, "--password-file", pw, "--log-level", "warn")
	if r := dev.gpuaas(b, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		b.Fatalf("login exited %d: %s", r.code, r.stderr)
	}
	client := benchClient(b, cfg)
	ctx := context.Background()
	a, err := client.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		b.Fatal(err)
	}
	until := func(what string, done func() bool) {
		for deadline := time.Now().Add(2 * time.Minute); !done(); time.Sleep(30 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("waited 2m for %s", what)
			}
		}
	}
	until("the allocation to be active", func() bool {
		got, err := client.AllocGet(ctx, a.ID)
		return err == nil && got.State == api.AllocActive
	})
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		j, err := client.JobCreate(ctx, api.JobCreateRequest{AllocationID: a.ID, Run: "sleep 60", Release: "keep"})
		if err != nil {
			b.Fatal(err)
		}
		until("the job to run", func() bool {
			got, err := client.JobGet(ctx, j.ID)
			return err == nil && got.State == api.JobRunning
		})
		took = append(took, time.Since(start))
		b.StopTimer()
		if _, err := client.JobCancel(ctx, j.ID); err != nil {
			b.Fatal(err)
		}
		until("the job to end", func() bool {
			got, err := client.JobGet(ctx, j.ID)
			return err == nil && api.JobFinal(got.State)
		})
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
	b.ReportMetric(ms(took[len(took)*99/100]), "p99-ms")
}

// benchClient is an API client with the session `gpuaas login` kept in
// config directory cfg.
func benchClient(b *testing.B, cfg string) *api.Client {
	b.Helper()
	raw, err := os.ReadFile(filepath.Join(cfg, "config.json"))
	if err != nil {
		b.Fatal(err)
	}
	var c struct {
		Contexts map[string]struct{ Server, Token string } `json:"contexts"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.Contexts["dev"].Token == "" {
		b.Fatalf("config: %v %s", err, raw)
	}
	opts, _ := api.SessionConnOptions(c.Contexts["dev"].Token)
	nc, err := nats.Connect(c.Contexts["dev"].Server, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return api.NewClient(nc, api.WithToken(c.Contexts["dev"].Token))
}

func tempDirTB(b *testing.B, prefix string) string {
	b.Helper()
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil { // the postgres account must traverse it
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(d) })
	return d
}
