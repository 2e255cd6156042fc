package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestAppPriceFollowsTheImageInDev (docs/apps.md, "Prices";
// docs/decisions/0059-app-prices.md): through the built binary and
// `gpuaas dev` with real podman, running the priced stock app's image by
// its id rather than the app's name still carries the app's price, and
// its dry run quotes it.
func TestAppPriceFollowsTheImageInDev(t *testing.T) {
	needPodman(t)
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile)
	if r := dev.gpuaas(t, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login exited %d: %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "admin", "app-price", "set", "tiny", "36"); r.code != 0 {
		t.Fatalf("admin app-price set: exit %d %q", r.code, r.stderr)
	}
	var imgs []api.Image
	dev.gpuaasJSON(t, &imgs, "image", "list", "--json")
	imageID := ""
	for _, img := range imgs {
		if img.Name == "tiny" {
			imageID = img.ID
		}
	}
	if imageID == "" {
		t.Fatalf("no image tiny in %+v", imgs)
	}
	// The dry run quotes what the run charges: the app's price.
	if r := dev.gpuaas(t, "", "app", "run", imageID, "--sku", "h100-baremetal", "--gpus", "8", "--dry-run"); r.code != 0 ||
		!strings.Contains(r.stdout, " + app tiny $36.00/h = $") {
		t.Errorf("app run %s --dry-run: exit %d %q %q; want the app tiny's price", imageID, r.code, r.stdout, r.stderr)
	}
	r := dev.gpuaas(t, "", "app", "run", imageID, "--sku", "h100-baremetal", "--gpus", "8", "--name", "byimage", "-d", "--", "/bin/sleep", "600")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(id, "w-") {
		t.Fatalf("app run %s: exit %d %q %q", imageID, r.code, r.stdout, r.stderr)
	}
	var wl api.Workload
	testutil.EventuallyWithin(t, 2*time.Minute, "the workload to run", func() bool {
		dev.gpuaasJSON(t, &wl, "app", "get", id, "--json")
		return wl.State == api.WorkloadRunning || api.WorkloadFinal(wl.State)
	})
	if wl.AppPricePerHourMinor != 3600 || wl.AppID == "" {
		t.Errorf("workload of the image by id: %+v; want the app tiny's 3600 an hour", wl)
	}
	if r := dev.gpuaas(t, "", "alloc", "release", wl.AllocationID); r.code != 0 {
		t.Fatalf("alloc release: exit %d %s", r.code, r.stderr)
	}
}
