package node

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

var now = cmdtest.Now // the clock of cmdtest.Factory

func testDetail() *api.NodeDetail {
	return &api.NodeDetail{
		Node: api.Node{ID: "n-1", Name: "gpu-01", Shape: api.ShapeGPUSlice, GPUModel: "H100", State: api.NodeReady,
			SlotsTotal: 2, SlotsFree: 1, SlotsPending: 1, SlotsQuarantined: 1, TasksOpen: 2, LastHeartbeat: &heartbeat, CreatedAt: now.Add(-24 * time.Hour),
			Health: json.RawMessage(`{"topology":{"blockers":[{"code":"kvm_missing","message":"no /dev/kvm","device":"/dev/kvm"}]}}`)},
		Slots: []api.Slot{
			{ID: "s-0", NodeID: "n-1", Index: 0, GPUPCI: "0000:17:00.0", GPUUUID: "GPU-5a1e", NVMe: "nvme0", FabricVF: "0000:3b:00.2", NUMANode: 0, State: api.SlotFree},
			{ID: "s-1", NodeID: "n-1", Index: 1, GPUPCI: "0000:18:00.0", NUMANode: 1, State: api.SlotReserved, AllocationID: "a-1",
				Quarantine: &api.SlotQuarantine{At: now.Add(-2 * time.Hour), Reason: "xid 79", By: "system:health"}},
		},
	}
}

var heartbeat = now.Add(-time.Hour)

func testStreams(tty bool) (*cmdutil.IOStreams, *bytes.Buffer, *bytes.Buffer) {
	ios, _, out, errOut := cmdutil.Test()
	ios.SetStdoutTTY(tty)
	ios.SetNoColor(true)
	return ios, out, errOut
}

func TestPrintNodes(t *testing.T) {
	nodes := []api.Node{testDetail().Node}
	tests := []struct {
		name string
		tty  bool
		want string
	}{
		{"tty", true, "NAME    ID   SHAPE      GPU   STATE  USED  FREE  PENDING  QUARANTINED  TASKS  HEARTBEAT\n" +
			"gpu-01  n-1  gpu_slice  H100  ready  1     1     1        1            2      1h ago\n"},
		{"piped", false, "gpu-01\tn-1\tgpu_slice\tH100\tready\t1\t1\t1\t1\t2\t2030-01-10T11:00:00Z\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, out, _ := testStreams(tt.tty)
			if err := printNodes(ios, now, nodes); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestPrintNodeDetail(t *testing.T) {
	tests := []struct {
		name string
		tty  bool
		want string
	}{
		{"tty", true, "NAME    ID   SHAPE      GPU   STATE  USED  FREE  PENDING  QUARANTINED  TASKS  HEARTBEAT\n" +
			"gpu-01  n-1  gpu_slice  H100  ready  1     1     1        1            2      1h ago\n" +
			"blocker: kvm_missing: no /dev/kvm (/dev/kvm)\n" +
			"\n" +
			"SLOT  INDEX  STATE     NUMA  GPU PCI       NVME   FABRIC VF     ALLOCATION  QUARANTINE                         GPU UUID\n" +
			"s-0   0      free      0     0000:17:00.0  nvme0  0000:3b:00.2                                                 GPU-5a1e\n" +
			"s-1   1      reserved  1     0000:18:00.0                       a-1         xid 79 (by system:health, 2h ago)\n"},
		{"piped: slots only", false, "s-0\t0\tfree\t0\t0000:17:00.0\tnvme0\t0000:3b:00.2\t\t\tGPU-5a1e\n" +
			"s-1\t1\treserved\t1\t0000:18:00.0\t\t\ta-1\txid 79 (by system:health, 2030-01-10T10:00:00Z)\t\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, out, _ := testStreams(tt.tty)
			if err := printNodeDetail(ios, now, testDetail()); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
