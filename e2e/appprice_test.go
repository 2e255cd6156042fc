package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestAppPriceInDev (docs/apps.md, "Prices"): through the built binary
// and `gpuaas dev` with real podman: the admin sets the stock app's price
// per hour; `app run tiny --sku … --dry-run` shows it in the price line
// and rents nothing, `--alloc … --dry-run` too, with the allocation's id; a workload of it is charged the app's price for its
// running time (`billing usage --workload`'s app_amount_minor, within a
// cent a second of its running time at $36.00/h), apart from the
// allocation's own charge; after the allocation's release the app charge
// stops growing.
func TestAppPriceInDev(t *testing.T) {
	needPodman(t)
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile)
	if r := dev.gpuaas(t, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login exited %d: %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "admin", "app-price", "set", "tiny", "-1.00"); r.code != 2 {
		t.Errorf("a negative price: exit %d %q; want a usage error (2)", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "admin", "app-price", "set", "tiny", "36"); r.code != 0 || !strings.Contains(r.stdout, "\ttiny\t3600\t0\ttrue") {
		t.Fatalf("admin app-price set: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := dev.gpuaas(t, "", "admin", "app-price", "list"); r.code != 0 || !strings.Contains(r.stdout, "\ttiny\tpromoted\t3600\t") {
		t.Errorf("admin app-price list: exit %d %q", r.code, r.stdout)
	}
	r := dev.gpuaas(t, "", "app", "run", "tiny", "--sku", "h100-baremetal", "--gpus", "8", "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "h100-baremetal (8 GPU(s)) $") || !strings.Contains(r.stdout, " + app tiny $36.00/h = $") {
		t.Errorf("app run --dry-run: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	var allocs []api.Allocation
	dev.gpuaasJSON(t, &allocs, "alloc", "list", "--json")
	if len(allocs) != 0 {
		t.Fatalf("%d allocations after a dry run; want 0", len(allocs))
	}

	r = dev.gpuaas(t, "", "app", "run", "tiny", "--sku", "h100-baremetal", "--gpus", "8", "--name", "priced", "-d", "--", "/bin/sleep", "600")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(id, "w-") {
		t.Fatalf("app run: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	var wl api.Workload
	testutil.EventuallyWithin(t, 2*time.Minute, "the workload to run", func() bool {
		dev.gpuaasJSON(t, &wl, "app", "get", id, "--json")
		return wl.State == api.WorkloadRunning || api.WorkloadFinal(wl.State)
	})
	if wl.State != api.WorkloadRunning || wl.AppPricePerHourMinor != 3600 {
		t.Fatalf("workload %+v; want running at the app's 3600 an hour", wl)
	}
	// On the allocation: its id, the price its meter runs at, the app's.
	if r := dev.gpuaas(t, "", "app", "run", "tiny", "--alloc", wl.AllocationID, "--dry-run"); r.code != 0 ||
		!strings.HasPrefix(r.stdout, wl.AllocationID+" h100-baremetal (8 GPU(s)) $") || !strings.Contains(r.stdout, " + app tiny $36.00/h = $") {
		t.Errorf("app run --alloc --dry-run: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	usage := func() api.WorkloadUsage {
		t.Helper()
		var u []api.WorkloadUsage
		dev.gpuaasJSON(t, &u, "billing", "usage", "--workload", id, "--json")
		if len(u) != 1 {
			t.Fatalf("billing usage --workload %s: %+v", id, u)
		}
		return u[0]
	}
	testutil.EventuallyWithin(t, 2*time.Minute, "an app charge", func() bool { return usage().AppAmountMinor > 0 })
	if r := dev.gpuaas(t, "", "alloc", "release", wl.AllocationID); r.code != 0 {
		t.Fatalf("alloc release: exit %d %s", r.code, r.stderr)
	}
	testutil.EventuallyWithin(t, 2*time.Minute, "the workload to end with its allocation", func() bool {
		dev.gpuaasJSON(t, &wl, "app", "get", id, "--json")
		return api.WorkloadFinal(wl.State)
	})
	after := usage()
	// A cent a second of its running time, never beyond the release
	// (the release may come a little before the workload's recorded end).
	if after.AppPricePerHourMinor != 3600 || after.AppAmountMinor <= 0 || after.AppAmountMinor > after.Seconds+1 {
		t.Errorf("after the release: %+v; want app_amount_minor in (0, seconds %d]", after, after.Seconds)
	}
	time.Sleep(12 * time.Second) // more than a billing window of `gpuaas dev`
	if again := usage(); again.AppAmountMinor != after.AppAmountMinor {
		t.Errorf("app charge grew after the release: %d then %d", after.AppAmountMinor, again.AppAmountMinor)
	}
}
