package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestJobWorkdirInDev is the workdir point of jobs' acceptance with the
// built binary and `gpuaas dev`: a 30 MB directory with a .gitignore'd
// 100 MB file (random bytes made here) is uploaded by `gpuaas run` to
// the allocation it rents, after the price and once the allocation is
// active; only what is not ignored arrives (nor .git, nor what a nested
// .gitignore or the .gpuaasignore leave out); the job starts in it and
// prints the sha256 of every file it sees, which match the local ones.
// A workdir that does not exist is refused naming the field, before
// anything is created or charged (no allocation, no ledger row).
func TestJobWorkdirInDev(t *testing.T) {
	dev, _ := loggedInDev(t)
	top := t.TempDir()
	proj := filepath.Join(top, "proj")
	rng := rand.New(rand.NewChaCha8([32]byte{7}))
	random := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return string(b)
	}
	sent := map[string]string{ // what must arrive
		".gitignore":       "big.bin\n*.ckpt\n",
		".gpuaasignore":    "notes/\n",
		"data/.gitignore":  "scratch/\n!keep.ckpt\n",
		"data/part-0":      random(10 << 20),
		"data/part-1":      random(10 << 20),
		"data/part-2":      random(10 << 20),
		"data/keep.ckpt":   "kept by the nested negation\n",
		"src/train.sh":     "echo training\n",
		"src/nested/x.txt": "x\n",
	}
	left := map[string]string{ // what must not
		"big.bin":           random(100 << 20),
		"model.ckpt":        "ignored by pattern\n",
		"data/scratch/tmp":  "ignored by the nested .gitignore\n",
		"notes/todo.txt":    "ignored by .gpuaasignore\n",
		".git/HEAD":         "ref: refs/heads/main\n",
		".git/objects/pack": "never sent\n",
	}
	for _, files := range []map[string]string{sent, left} {
		for rel, content := range files {
			p := filepath.Join(proj, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var want []string
	for rel, content := range sent {
		sum := sha256.Sum256([]byte(content))
		want = append(want, hex.EncodeToString(sum[:])+"  ./"+rel)
	}
	slices.Sort(want)

	var allocsBefore []api.Allocation
	dev.gpuaasJSON(t, &allocsBefore, "alloc", "list", "--all", "--json")
	ledgerBefore := len(dev.ledger(t))

	// A workdir that does not exist: refused naming the field, nothing
	// created or charged.
	missing := writeFile(t, top, "missing.yaml", "resources: {sku: h100-baremetal, gpus: 8}\nworkdir: nope\nrun: ls\n")
	if r := dev.gpuaas(t, "", "run", "-f", missing); r.code != 2 || !strings.Contains(r.stderr, "workdir: "+filepath.Join(top, "nope")+" does not exist") {
		t.Errorf("run with a missing workdir: exit %d %q; want 2 naming workdir", r.code, r.stderr)
	}
	var allocs []api.Allocation
	dev.gpuaasJSON(t, &allocs, "alloc", "list", "--all", "--json")
	if len(allocs) != len(allocsBefore) || len(dev.ledger(t)) != ledgerBefore {
		t.Fatalf("after the refused run: %d allocations, %d ledger rows; want %d and %d",
			len(allocs), len(dev.ledger(t)), len(allocsBefore), ledgerBefore)
	}

	// The acceptance case: rent, upload, run in the uploaded directory.
	job := writeFile(t, top, "job.yaml", `resources: {sku: h100-baremetal, gpus: 8}
workdir: proj
setup: test -f src/train.sh
run: find . -type f | LC_ALL=C sort | xargs sha256sum
`)
	r := dev.gpuaas(t, "", "run", "-f", job)
	if r.code != 0 {
		t.Fatalf("run with a workdir: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	got := strings.Split(strings.TrimSpace(r.stdout), "\n")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the job saw (sha256, path):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The order of events: the price, the allocation active, the upload, the job.
	order := []string{"per hour", ": active", "uploading workdir " + proj, "workdir unpacked and checked", "job j-"}
	at := 0
	for _, s := range order {
		i := strings.Index(r.stderr[at:], s)
		if i < 0 {
			t.Fatalf("stderr lacks %q after position %d (want, in order, %q):\n%s", s, at, order, r.stderr)
		}
		at += i
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("%d files", len(sent))) {
		t.Errorf("stderr %q; want the upload's %d files", r.stderr, len(sent))
	}
	var list []api.Job
	dev.gpuaasJSON(t, &list, "job", "list", "--json")
	if len(list) != 1 || !strings.HasPrefix(list[0].Workdir, ".gpuaas/workdirs/w-") || list[0].State != api.JobSucceeded {
		t.Fatalf("jobs %+v; want one succeeded in .gpuaas/workdirs/w-…", list)
	}

	// On an allocation of one's own: an upload the node refuses (a file
	// where its directory goes) exits 125 with the node's reason and
	// creates no job; --detach returns once the upload is checked and the
	// job started, and `job wait` follows it.
	testutil.EventuallyWithin(t, 2*time.Minute, "the rented allocation to be released (its node free again)", func() bool {
		var rented api.Allocation
		dev.gpuaasJSON(t, &rented, "alloc", "get", list[0].AllocationID, "--json")
		return rented.State == api.AllocReleased
	})
	a := dev.createActive(t, "--sku", "h100-baremetal", "--gpus", "8")
	if r := dev.gpuaas(t, "", "ssh", a.ID, "--", "mkdir -p .gpuaas && touch .gpuaas/workdirs"); r.code != 0 {
		t.Fatalf("ssh: exit %d %s", r.code, r.stderr)
	}
	onA := writeFile(t, top, "on-a.yaml", "resources: {allocation: "+a.ID+"}\nworkdir: proj\nrun: cat src/train.sh\nrelease: keep\n")
	if r := dev.gpuaas(t, "", "run", "-f", onA); r.code != 125 || !strings.Contains(r.stderr, "cannot make the upload's directory") ||
		!strings.Contains(r.stderr, "nothing ran") {
		t.Errorf("run with an upload the node refuses: exit %d %q; want 125 with the node's reason", r.code, r.stderr)
	}
	dev.gpuaasJSON(t, &list, "job", "list", "--json")
	if len(list) != 1 {
		t.Fatalf("%d jobs after a refused upload; want 1 (none created)", len(list))
	}
	if r := dev.gpuaas(t, "", "ssh", a.ID, "--", "rm .gpuaas/workdirs"); r.code != 0 {
		t.Fatalf("ssh: exit %d %s", r.code, r.stderr)
	}
	r = dev.gpuaas(t, "", "run", "-f", onA, "--detach")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(id, "j-") || !strings.Contains(r.stderr, "workdir unpacked and checked") {
		t.Fatalf("run --detach with a workdir: exit %d %q %q; want the job id after the upload", r.code, r.stdout, r.stderr)
	}
	if r := dev.gpuaas(t, "", "job", "wait", id); r.code != 0 || !strings.Contains(r.stdout+r.stderr, "echo training") {
		t.Errorf("job wait: exit %d %q %q; want 0 with src/train.sh's content", r.code, r.stdout, r.stderr)
	}
}

// TestJobWorkdirOnASlice: on a slice (`gpuaas dev --vm`, the minimal
// guest under TCG, busybox's tar and sha256sum), the workdir lands
// inside the guest, checked there, and the job starts in it: it prints
// detect-virt's answer and the sha256 of what it sees, which are the
// files not ignored.
func TestJobWorkdirOnASlice(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a real guest; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Fatal("gpuaas dev --vm needs root (libvirtd's qemu:///system), or go test -short")
	}
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--vm", "--http-port", "0")
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login: exit %d %s", r.code, r.stderr)
	}
	// Without --wait: a guest under TCG on a loaded machine may take longer
	// to boot than one CLI call's minute here.
	r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h200-slice", "--gpus", "1", "--json", "id", "--jq", ".id")
	a := strings.TrimSpace(r.stdout)
	if r.code != 0 || a == "" {
		t.Fatalf("alloc create: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	// Released before gpuaas dev stops, so that no guest outlives the test.
	t.Cleanup(func() {
		dev.gpuaas(t, "", "alloc", "release", a)
		testutil.EventuallyWithin(t, 3*time.Minute, "the slice to be released", func() bool {
			var got api.Allocation
			dev.gpuaasJSON(t, &got, "alloc", "get", a, "--json")
			return got.State == api.AllocReleased || got.State == api.AllocFailed
		})
	})
	testutil.EventuallyWithin(t, 5*time.Minute, "the slice to be active", func() bool {
		var got api.Allocation
		dev.gpuaasJSON(t, &got, "alloc", "get", a, "--json")
		if got.State == api.AllocFailed {
			t.Fatalf("slice %s failed: %s", a, got.Reason)
		}
		return got.State == api.AllocActive
	})
	proj := filepath.Join(t.TempDir(), "proj")
	files := map[string]string{".gitignore": "*.bin\n", "run.sh": "echo in the guest\n", "sub/data.txt": "rows\n", "big.bin": "ignored\n"}
	for rel, content := range files {
		p := filepath.Join(proj, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"qemu"}
	for _, rel := range []string{".gitignore", "run.sh", "sub/data.txt"} {
		sum := sha256.Sum256([]byte(files[rel]))
		want = append(want, hex.EncodeToString(sum[:])+"  ./"+rel)
	}
	job := writeFile(t, filepath.Dir(proj), "job.yaml", "resources:\n  allocation: "+a+
		"\nworkdir: proj\nrun: \"detect-virt; find . -type f | LC_ALL=C sort | xargs sha256sum\"\nrelease: keep\n")
	r = dev.gpuaas(t, "", "run", "-f", job)
	if got := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || !slices.Equal(got, want) {
		t.Errorf("a job with a workdir on the slice: exit %d, stdout %q; want %q\n%s", r.code, got, want, r.stderr)
	}
}
