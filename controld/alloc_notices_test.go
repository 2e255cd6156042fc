package controld_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestAllocGetShowsNotices: alloc.get returns the allocation's notices —
// none while all is well, then the quarantine notice of a GPU that
// failed, with when it was raised — and only the allocation's own.
func TestAllocGetShowsNotices(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute})
	c := e.Client(e.AdminToken)
	e.credit(t, 100_00)
	a := e.activate(t, c, "h200-slice", 2)
	other := e.activate(t, c, "h200-slice", 1)
	got, err := c.AllocGet(t.Context(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Notices) != 0 {
		t.Fatalf("notices before any fault: %+v; want none", got.Notices)
	}
	e.clock.Advance(time.Minute)
	gpu := a.Slots[1].GPUPCI
	e.applyFault(t, a.NodeID, hostproto.GPUFault{NodeID: a.NodeID, GPU: gpu, XID: 79, At: e.clock.Now(),
		Message: "NVRM: Xid (PCI:" + gpu[:10] + "): 79, GPU has fallen off the bus."})

	got, err = c.AllocGet(t.Context(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Notices) != 1 {
		t.Fatalf("notices after the fault: %+v; want the quarantine notice", got.Notices)
	}
	n := got.Notices[0]
	if n.Kind != api.NoticeQuarantine || n.AllocationID != a.ID || !strings.Contains(n.Message, gpu) || n.At.IsZero() ||
		n.At.Before(got.UpdatedAt) {
		t.Errorf("notice %+v; want a quarantine notice of %s naming %s, raised after the allocation's last change (%v)",
			n, a.ID, gpu, got.UpdatedAt)
	}
	if o, err := c.AllocGet(t.Context(), other.ID); err != nil || len(o.Notices) != 0 {
		t.Errorf("the other allocation's notices: %+v, %v; want none", o, err)
	}
}
