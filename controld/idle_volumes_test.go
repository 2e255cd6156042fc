package controld_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestIdleWarningNamesVolumesThatStay: the idle warning of an allocation
// with a volume attached names the volume and its mount path and says it
// stays (kept, still charged); the warning of one without says nothing
// of volumes.
func TestIdleWarningNamesVolumesThatStay(t *testing.T) {
	t.Parallel()
	e := startIdle(t)
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	e.Credit(t, "", 10_000_000)
	evs := notices(t, e, e.Admin.ID, e.AdminToken)
	if _, err := c.ProjectSetPolicy(ctx, api.ProjectPolicyRequest{IdleReleaseAfter: "10m"}); err != nil {
		t.Fatal(err)
	}
	v, err := c.VolumeCreate(ctx, api.VolumeCreateRequest{Name: "data", Size: "1G", Node: "sim-h100-1"})
	if err != nil {
		t.Fatal(err)
	}
	e.settleVolumeAt(t, v, api.TaskVolumeCreate)
	with, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8,
		Volumes: []api.VolumeMount{{Volume: "data", Path: "/checkpoints/run"}}})
	if err != nil {
		t.Fatal(err)
	}
	activateID(t, e, with.ID)
	without := e.createActive(t, c, api.AllocCreateRequest{})

	e.clock.Advance(8 * time.Minute)
	if res := e.idleTick(t); res.Warned != 2 {
		t.Fatalf("tick at the warnings: %+v; want two", res)
	}
	got := map[string]string{}
	for range 2 {
		n := nextNotice(t, evs)
		got[n.AllocationID] = n.Message
	}
	if m := got[with.ID]; !strings.Contains(m, "its volume data (/checkpoints/run) stays on node sim-h100-1, detached and kept") {
		t.Errorf("warning of %s: %q; want it to name data at /checkpoints/run staying", with.ID, m)
	}
	if m := got[without.ID]; m == "" || strings.Contains(m, "volume") {
		t.Errorf("warning of %s: %q; want one without volumes", without.ID, m)
	}
}
