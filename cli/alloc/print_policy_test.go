package alloc

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestPrintAllocationPolicyTTY(t *testing.T) {
	ios, _, out, _ := cmdtest.Streams(true)
	a := testAlloc()
	release, maxAt, last := now.Add(25*time.Minute), now.Add(8*time.Hour), now.Add(-5*time.Minute)
	a.Policy = &api.AllocPolicy{IdleReleaseAfterSeconds: 1800, IdleFrom: "project", MaxDurationSeconds: 8 * 3600,
		LastActiveAt: &last, IdleReleaseAt: &release, MaxDurationAt: &maxAt}
	if err := printAllocation(ios, now, &a); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  idle release  after 30m0s without activity (project's); at " + release.Local().Format("15:04:05") + " if unused\n",
		"  max duration  8h0m0s; released at " + maxAt.Local().Format("15:04:05") + "\n",
		"  last active   " + last.Local().Format("15:04:05") + "\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("got\n%s\nwant a line %q", out.String(), want)
		}
	}
}

func TestPrintAllocationQueuePosition(t *testing.T) {
	ios, _, out, _ := cmdtest.Streams(true)
	a := testAlloc()
	a.State, a.Queued, a.QueuePosition, a.NodeID, a.Slots = api.AllocRequested, true, 3, "", nil
	if err := printAllocation(ios, now, &a); err != nil {
		t.Fatal(err)
	}
	if want := a.ID + "  requested (queued for capacity, 3rd in line)\n"; !strings.HasPrefix(out.String(), want) {
		t.Errorf("got\n%s\nwant it to start with %q", out.String(), want)
	}
}
