package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestJobInImageInDev: through the built binary and `gpuaas dev` with real
// podman (docs/jobs.md "Images"): `gpuaas run -f job.yaml` with `image:
// tiny` runs setup and run in a container of the stock image, printing
// its /etc/os-release, and exits with the job's own code; an unknown
// image is refused naming the field image before anything is created,
// whether the job names an allocation or a SKU to rent.
func TestJobInImageInDev(t *testing.T) {
	needPodman(t)
	dev, _ := loggedInDev(t)
	allocs := func() int {
		var list []api.Allocation
		dev.gpuaasJSON(t, &list, "alloc", "list", "--json")
		return len(list)
	}
	jobs := func() int {
		var list []api.Job
		dev.gpuaasJSON(t, &list, "job", "list", "--json")
		return len(list)
	}

	// An unknown image with a SKU: refused before anything is rented.
	if r := dev.gpuaas(t, "resources: {sku: h100-baremetal, gpus: 8}\nimage: ghost\nrun: x\n", "run", "-f", "-"); r.code != 7 ||
		!strings.Contains(r.stderr, "image: no image \"ghost\"") {
		t.Errorf("run with an unknown image and a SKU: exit %d %q; want 7 naming image", r.code, r.stderr)
	}
	if n := allocs(); n != 0 {
		t.Fatalf("%d allocations after a refused run; want 0", n)
	}

	a := dev.createActive(t, "--sku", "h100-baremetal", "--gpus", "8")
	if r := dev.gpuaas(t, fmt.Sprintf("resources: {allocation: %s}\nimage: ghost\nrun: x\nrelease: keep\n", a.ID), "run", "-f", "-"); r.code != 7 ||
		!strings.Contains(r.stderr, "image: no image \"ghost\"") {
		t.Errorf("run with an unknown image: exit %d %q; want 7 naming image", r.code, r.stderr)
	}
	if n := jobs(); n != 0 {
		t.Fatalf("%d jobs after a refused run; want 0", n)
	}

	job := fmt.Sprintf("resources: {allocation: %s}\nimage: tiny\nsetup: echo from-setup > /setup-ran\nrun: cat /etc/os-release; cat /setup-ran; exit 3\nrelease: keep\n", a.ID)
	r := dev.gpuaas(t, job, "run", "-f", "-")
	if r.code != 3 || !strings.Contains(r.stdout, "ID=gpuaas-tiny\n") || !strings.Contains(r.stdout, "from-setup\n") {
		t.Fatalf("run in image tiny: exit %d stdout %q stderr %q; want 3 printing ID=gpuaas-tiny", r.code, r.stdout, r.stderr)
	}
	var list []api.Job
	dev.gpuaasJSON(t, &list, "job", "list", "--json")
	if len(list) != 1 || list[0].Image != "tiny" || !strings.Contains(list[0].ImageRef, "@sha256:") {
		t.Errorf("job list: %+v; want one job showing image tiny and its digest", list)
	}
}
