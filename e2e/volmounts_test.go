package e2e

import (
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestVolumesInJobsAndApps is docs/jobs.md's and docs/apps.md's volumes
// through the built binary and `gpuaas dev` as root (real ext4 volumes,
// real users, real rootless podman): a job.yaml with volumes rents its
// allocation on the volume's node (the price line says so), writes the
// volume and is released on exit; a second job reads the same sha256; a
// job naming an allocation the volume is not attached to is refused
// naming it before anything runs. Then `app run -f app.yaml` with a mount
// writes on the volume from its container and `ssh` into the allocation
// sees the file, the renter's own; a mount of a volume not attached to
// the allocation is refused naming mounts[0].volume. (In `gpuaas dev` a
// bare-metal volume is mounted under the sim host's root and linked as
// ~/NAME, so the jobs use the link; docs/volumes.md.)
func TestVolumesInJobsAndApps(t *testing.T) {
	needPodman(t)
	dev, cfg := loggedInDev(t)
	gpuaas := dev.mustRun(t)
	gpuaas("volume", "create", "data", "--size", "64M", "--node", "sim-metal-2", "--wait")
	gpuaas("volume", "create", "other", "--size", "16M", "--node", "sim-metal-2", "--wait")
	node := gpuaas("volume", "get", "data", "--json", "node_id", "--jq", ".node_id")
	waitReady := func() {
		t.Helper()
		testutil.EventuallyWithin(t, 2*time.Minute, "the volume to be ready again", func() bool {
			return gpuaas("volume", "get", "data", "--json", "state", "--jq", ".state") == api.VolumeReady
		})
	}

	// Job 1 writes, on an allocation rented with the volume; released on exit.
	job := "resources: {sku: h100-baremetal, gpus: 8}\nvolumes: [data:/data/x]\nrelease: on-exit\nrun: %s\n"
	r := dev.gpuaas(t, strings.Replace(job, "%s", "echo hi > ~/data/f; sha256sum ~/data/f", 1), "run", "-f", "-")
	if r.code != 0 || !strings.Contains(r.stdout, "  ") {
		t.Fatalf("job 1: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	sum := strings.Fields(r.stdout)[0]
	if want := "on node " + node + ": the node of volume data"; !strings.Contains(r.stderr, want) {
		t.Errorf("job 1's price line:\n%s\nwant %q", r.stderr, want)
	}
	waitReady()
	// Job 2 reads it on another allocation (another user).
	r = dev.gpuaas(t, strings.Replace(job, "%s", "sha256sum ~/data/f; cat ~/data/f; stat -c %U ~/data/f", 1), "run", "-f", "-")
	if f := strings.Fields(r.stdout); r.code != 0 || len(f) != 4 || f[0] != sum || f[2] != "hi" {
		t.Fatalf("job 2: exit %d\n%s\n%s\nwant %s and hi", r.code, r.stdout, r.stderr, sum)
	}
	waitReady()

	// An allocation with the volume at /data/x; a job naming it with
	// another path, or another volume, is refused before it starts.
	a := dev.createActive(t, "--sku", "h100-baremetal", "--volume", "data:/data/x")
	for _, bad := range []struct{ vols, says string }{
		{"[data]", "volumes[0]: volume data is attached to allocation " + a.ID + " at /data/x, not at /data/data"},
		{"[data:/data/x, other]", "volumes[1]: volume other is ready, not attached to allocation " + a.ID},
	} {
		spec := "resources: {allocation: " + a.ID + "}\nvolumes: " + bad.vols + "\nrun: echo ran\n"
		if r := dev.gpuaas(t, spec, "run", "-f", "-"); r.code != 2 || !strings.Contains(r.stderr, bad.says) || strings.Contains(r.stdout, "ran") {
			t.Errorf("volumes %s: exit %d %q; want 2 saying %q", bad.vols, r.code, r.stderr, bad.says)
		}
	}
	var jobs []api.Job
	dev.gpuaasJSON(t, &jobs, "job", "list", "--alloc", a.ID, "--json")
	if len(jobs) != 0 {
		t.Errorf("%d jobs on %s after the refused runs; want none", len(jobs), a.ID)
	}

	// An app whose container writes on the volume; ssh sees the file.
	dir := t.TempDir()
	manifest := func(volume string) string {
		return writeFile(t, dir, volume+".yaml", "name: writer-"+volume+"\nimage: tiny\ngpus: 0\n"+
			`command: ["/bin/sh", "-c", "cat /work/f && echo from-the-container > /work/c && id -u"]`+"\n"+
			"mounts:\n  - {volume: "+volume+", path: /work}\n")
	}
	if r := dev.gpuaas(t, "", "app", "run", "-f", manifest("other"), "--alloc", a.ID); r.code != 7 ||
		!strings.Contains(r.stderr, "mounts[0].volume: volume other is ready, not attached to allocation "+a.ID) {
		t.Errorf("a mount of a volume not attached: exit %d %q; want 7 naming mounts[0].volume", r.code, r.stderr)
	}
	r = dev.gpuaas(t, "", "app", "run", "-f", manifest("data"), "--alloc", a.ID, "-d")
	if r.code != 0 {
		t.Fatalf("app run: exit %d %s", r.code, r.stderr)
	}
	w := strings.TrimSpace(r.stdout)
	var got api.Workload
	testutil.EventuallyWithin(t, 2*time.Minute, "the writer to end", func() bool {
		dev.gpuaasJSON(t, &got, "app", "get", w, "--json")
		return got.State == api.WorkloadStopped || got.State == api.WorkloadFailed
	})
	if got.State != api.WorkloadStopped || !strings.Contains(strings.Join(got.LastLines, "\n"), "hi\n0") {
		t.Fatalf("the writer: %s %s %q; want stopped after printing hi and uid 0", got.State, got.Reason, got.LastLines)
	}
	out, code := openssh(t, "ssh", "-F", filepath.Join(cfg, "ssh", "dev", "config"), a.ID+"@localhost",
		"cat ~/data/c; stat -c %u ~/data/c; id -u")
	u, err := user.Lookup(api.PosixUser(a.ID))
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(out); code != 0 || len(f) != 3 || f[0] != "from-the-container" || f[1] != u.Uid || f[2] != u.Uid {
		t.Errorf("ssh into %s: exit %d %q; want the container's file, owned by the renter (uid %s)", a.ID, code, out, u.Uid)
	}
}
