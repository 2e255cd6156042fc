package tasks_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/workload/workloadtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestWorkloadRemoveTakesThePricedImage (docs/apps.md, "Prices"): a
// workload.stop with remove and remove_image removes the container and
// its image from the user's podman storage, so a priced app's image
// cannot be run by hand after its workload, whatever name the renter gave
// it; while another container of
// the user still uses the image, the image stays (that one runs on).
func TestWorkloadRemoveTakesThePricedImage(t *testing.T) {
	_, env := podmanHost(t)
	reg := workloadtest.Registry(t)
	ref := workloadtest.Push(t, reg, "test/wlapp-priced", nil)
	alloc := "a-wlp" + strconv.Itoa(os.Getpid())
	provisionTenant(t, env, alloc)
	for _, id := range []string{"w-p1", "w-p2"} {
		out, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: id, AllocationID: alloc,
			PosixUser: api.PosixUser(alloc), Image: ref, Command: []string{workloadtest.App, "serve"}})
		if r := wlReport(t, out, err); r.State != api.ContainerRunning {
			t.Fatalf("start %s: %+v; want running", id, r)
		}
	}
	remove := func(id string) hostproto.WorkloadReport {
		t.Helper()
		out, _, err := run(t, env, api.TaskWorkloadStop, hostproto.WorkloadStopParams{WorkloadID: id, AllocationID: alloc,
			PosixUser: api.PosixUser(alloc), Grace: time.Second, Remove: true, RemoveImage: true})
		return wlReport(t, out, err)
	}
	if r := remove("w-p1"); r.State != api.ContainerMissing {
		t.Errorf("removed w-p1: %+v; want its container gone", r)
	}
	if imgs := strings.TrimSpace(asTenant(t, env, alloc, "images", "-q")); imgs == "" {
		t.Error("the image went while w-p2 still runs it")
	}
	if r := wlStatus(t, env, alloc, "w-p2"); r.State != api.ContainerRunning {
		t.Errorf("w-p2 after w-p1's removal: %+v; want running", r)
	}
	// The renter's own name for it (`podman tag`) does not keep it.
	asTenant(t, env, alloc, "tag", ref, "localhost/mine:copy")
	remove("w-p2")
	if imgs := strings.TrimSpace(asTenant(t, env, alloc, "images", "-q")); imgs != "" {
		t.Errorf("the user's images after the last priced workload's removal: %q; want none", imgs)
	}
	// Again (a redelivered task): nothing to do, no error.
	if r := remove("w-p2"); r.State != api.ContainerMissing {
		t.Errorf("removed again: %+v; want missing", r)
	}
}
