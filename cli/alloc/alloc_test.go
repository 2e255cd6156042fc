package alloc

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

var now = cmdtest.Now // the clock of cmdtest.Factory

// testAlloc is an active two-GPU slice on NUMA node 1.
func testAlloc() api.Allocation {
	return api.Allocation{
		ID: "a-1", ProjectID: "p-1", UserID: "u-1", SKU: "h100-slice", Shape: api.ShapeGPUSlice,
		GPUs: 2, State: api.AllocActive, Version: 3, NodeID: "node-1",
		Slots: []api.Slot{
			{ID: "s-0", NodeID: "node-1", Index: 0, GPUPCI: "0000:17:00.0", NUMANode: 1, State: api.SlotReserved, AllocationID: "a-1"},
			{ID: "s-1", NodeID: "node-1", Index: 1, GPUPCI: "0000:18:00.0", NUMANode: 1, State: api.SlotReserved, AllocationID: "a-1"},
		},
		CreatedAt: now.Add(-5 * time.Minute), UpdatedAt: now.Add(-4 * time.Minute),
	}
}

func TestPrintAllocationTTY(t *testing.T) {
	ios, _, out, _ := cmdtest.Streams(true)
	a := testAlloc()
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
`
	if got := out.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestPrintAllocationQueuedTTY(t *testing.T) {
	ios, _, out, _ := cmdtest.Streams(true)
	a := api.Allocation{ID: "a-2", ProjectID: "p-1", SKU: "h100-node", Shape: api.ShapeBaremetal, GPUs: 8,
		State: api.AllocRequested, Queued: true, CreatedAt: now}
	if err := printAllocation(ios, now, &a); err != nil {
		t.Fatal(err)
	}
	want := `a-2  requested (queued for capacity)
  sku      h100-node (baremetal, 8 GPUs)
  project  p-1
  created  just now
`
	if got := out.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestPrintAllocationPiped(t *testing.T) {
	ios, _, out, _ := cmdtest.Streams(false)
	a := testAlloc()
	if err := printAllocation(ios, now, &a); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "a-1\tactive\th100-slice\t2\tnode-1\t2030-01-10T11:55:00Z\tp-1\n"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

func TestPrintAllocations(t *testing.T) {
	released := testAlloc()
	released.ID, released.State, released.NodeID, released.Project = "a-0", api.AllocReleased, "", "ml"
	active := testAlloc()
	active.Project = "dev"
	allocs := []api.Allocation{active, released}
	tests := []struct {
		name   string
		tty    bool
		allocs []api.Allocation
		want   string
		errOut string
	}{
		{"tty", true, allocs,
			"ID   STATE     SKU         GPUS  NODE    CREATED  PROJECT\n" +
				"a-1  active    h100-slice  2     node-1  5m ago   dev\n" +
				"a-0  released  h100-slice  2             5m ago   ml\n", ""},
		{"piped", false, allocs,
			"a-1\tactive\th100-slice\t2\tnode-1\t2030-01-10T11:55:00Z\tdev\n" +
				"a-0\treleased\th100-slice\t2\t\t2030-01-10T11:55:00Z\tml\n", ""},
		{"tty empty", true, nil, "", "No allocations\n"},
		{"piped empty", false, nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, errOut := cmdtest.Streams(tt.tty)
			if err := printAllocations(ios, now, tt.allocs); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
			if got := errOut.String(); got != tt.errOut {
				t.Errorf("got stderr %q; want %q", got, tt.errOut)
			}
		})
	}
}

func TestNUMANodes(t *testing.T) {
	slots := []api.Slot{{NUMANode: 1}, {NUMANode: 0}, {NUMANode: 1}}
	if got := numaNodes(slots); got != "0,1" {
		t.Errorf("got %q; want 0,1", got)
	}
}

// TestAllocListHelpDocumentsPipedColumns is the regression test of "piped
// output drops headers and switches money to cents without saying so" for
// alloc list and get: their --help names the piped columns, as many as a
// piped row has.
func TestAllocListHelpDocumentsPipedColumns(t *testing.T) {
	ios, _, out, _ := cmdtest.Streams(false)
	a := testAlloc()
	if err := printAllocations(ios, now, []api.Allocation{a}); err != nil {
		t.Fatal(err)
	}
	if got := len(strings.Split(strings.TrimSuffix(out.String(), "\n"), "\t")); got != len(listPiped) {
		t.Fatalf("a piped row has %d fields; --help documents %d", got, len(listPiped))
	}
	f := cmdtest.Factory(ios)
	for _, long := range []string{NewCmdList(f, nil).Long, NewCmdGet(f, nil).Long} {
		if !strings.Contains(long, "Piped (stdout not a terminal)") || !strings.Contains(long, strings.Join(listPiped, ", ")) {
			t.Errorf("--help:\n%s\nwant the piped columns %q", long, listPiped)
		}
	}
}
