package alloc

import (
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestPrintAllocationNotices: `alloc get` of an allocation whose GPU failed
// after it became active shows the failure as its reason (not the stale
// "provisioned") and lists its notices, free text escaped.
func TestPrintAllocationNotices(t *testing.T) {
	ios, _, out, _ := cmdtest.Streams(true)
	a := testAlloc()
	a.Reason = "provisioned"
	deadline := now.Add(2 * time.Hour)
	a.Notices = []api.AllocNotice{
		{AllocationID: a.ID, Kind: api.NoticeIdleWarning, Message: "gpuaas: idle for 1h", Deadline: &deadline, At: now.Add(-3 * time.Minute)},
		{AllocationID: a.ID, Kind: api.NoticeQuarantine, Message: "gpuaas: GPU 0000:18:00.0 failed\x1b[2J", At: now.Add(-time.Minute)},
	}
	if err := printAllocation(ios, now, &a); err != nil {
		t.Fatal(err)
	}
	want := `a-1  active
  sku      h100-slice (gpu_slice, 2 GPUs)
  node     node-1
  slots    #0 0000:17:00.0, #1 0000:18:00.0
  numa     1
  project  p-1
  created  5m ago
  reason   GPU 0000:18:00.0 failed\x1b[2J
  notices
    2030-01-10 11:57:00  idle_warning  gpuaas: idle for 1h (at 2030-01-10 14:00:00)
    2030-01-10 11:59:00  quarantine    gpuaas: GPU 0000:18:00.0 failed\x1b[2J
`
	if got := out.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestShownReasonKeepsStateReason: a notice older than the last change of
// state, or one that is not a GPU failure, leaves the state's reason.
func TestShownReasonKeepsStateReason(t *testing.T) {
	a := testAlloc()
	a.State, a.Reason = api.AllocReleased, "released by user"
	a.Notices = []api.AllocNotice{
		{Kind: api.NoticeQuarantine, Message: "gpuaas: GPU failed", At: a.UpdatedAt.Add(-time.Second)},
		{Kind: api.NoticeBudget, Message: "gpuaas: budget at 80%", At: a.UpdatedAt.Add(time.Second)},
	}
	if got := shownReason(&a); got != "released by user" {
		t.Errorf("reason %q; want %q", got, "released by user")
	}
}
