package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestAppCatalogInDev: through the built binary and `gpuaas dev` with
// real podman (docs/apps.md): `app list` shows the stock image; `app run
// --sku` of an unknown image is refused before anything is rented; `app
// run tiny --sku` prints the price line, rents and waits for the
// allocation, runs the workload on it and says the allocation stays; a GPU
// count above the allocation's is refused naming gpus; the stock image
// has a shell, so `ssh <workload>@gateway cat /etc/os-release` shows the
// image's; releasing the allocation stops the workload.
func TestAppCatalogInDev(t *testing.T) {
	needPodman(t)
	dev, cfg := loggedInDev(t)
	if r := dev.gpuaas(t, "", "ssh-config"); r.code != 0 {
		t.Fatalf("ssh-config: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "app", "list"); r.code != 0 || !strings.HasPrefix(r.stdout, "tiny\tplatform\t") ||
		strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("app list: exit %d %q; want the stock image tiny", r.code, r.stdout)
	}
	allocs := func() []api.Allocation {
		var list []api.Allocation
		dev.gpuaasJSON(t, &list, "alloc", "list", "--json")
		return list
	}

	if r := dev.gpuaas(t, "", "app", "run", "ghost", "--sku", "h100-baremetal", "--gpus", "8"); r.code != 6 || !strings.Contains(r.stderr, "ghost") {
		t.Errorf("app run --sku of an unknown image: exit %d %q; want 6", r.code, r.stderr)
	}
	if n := len(allocs()); n != 0 {
		t.Fatalf("%d allocations after a refused app run --sku; want 0", n)
	}

	r := dev.gpuaas(t, "", "app", "run", "tiny", "--sku", "h100-baremetal", "--gpus", "8", "--name", "box", "-d", "--", "/bin/sleep", "600")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(id, "w-") || !strings.Contains(r.stderr, "renting h100-baremetal (8 GPU(s)) at ") ||
		!strings.Contains(r.stderr, "was rented for this app: it stays") {
		t.Fatalf("app run --sku: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if i, j := strings.Index(r.stderr, "renting "), strings.Index(r.stderr, ": active"); i < 0 || j < i {
		t.Errorf("app run --sku: the price line is not first: %q", r.stderr)
	}
	list := allocs()
	if len(list) != 1 || list[0].State != api.AllocActive {
		t.Fatalf("allocations after app run --sku: %+v; want one active", list)
	}
	a := list[0]
	var wl api.Workload
	testutil.EventuallyWithin(t, 2*time.Minute, "the workload to run", func() bool {
		dev.gpuaasJSON(t, &wl, "app", "get", id, "--json")
		return wl.State == api.WorkloadRunning || api.WorkloadFinal(wl.State)
	})
	if wl.State != api.WorkloadRunning || wl.AllocationID != a.ID {
		t.Fatalf("workload %+v; want running on %s", wl, a.ID)
	}

	if r := dev.gpuaas(t, "", "app", "run", "tiny", "--alloc", a.ID, "--gpus", "9", "--name", "many"); r.code != 7 || !strings.Contains(r.stderr, "gpus: 9; allocation "+a.ID+" has 8") {
		t.Errorf("9 GPUs of an 8-GPU allocation: exit %d %q; want 7 naming gpus", r.code, r.stderr)
	}

	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")
	if out, code := sshWithStdin(t, "", "-F", sshConfig, id+"@localhost", "cat /etc/os-release"); code != 0 || !strings.Contains(out, "ID=gpuaas-tiny") {
		t.Errorf("cat /etc/os-release in the stock image: exit %d %q; want gpuaas-tiny's", code, out)
	}

	if r := dev.gpuaas(t, "", "alloc", "release", a.ID); r.code != 0 {
		t.Fatalf("alloc release: exit %d %s", r.code, r.stderr)
	}
	testutil.EventuallyWithin(t, 2*time.Minute, "the workload to stop with its allocation", func() bool {
		dev.gpuaasJSON(t, &wl, "app", "get", id, "--json")
		return api.WorkloadFinal(wl.State)
	})
}
