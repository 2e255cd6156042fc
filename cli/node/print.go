package node

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// printNodes prints nodes as a table.
func printNodes(ios *cmdutil.IOStreams, now time.Time, nodes []api.Node) error {
	if len(nodes) == 0 && ios.IsStdoutTTY() {
		fmt.Fprintln(ios.ErrOut, "No nodes")
		return nil
	}
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("name", "id", "shape", "gpu", "state", "free", "total", "created")
	for _, n := range nodes {
		addNodeRow(t, ios, now, n)
	}
	return t.Render()
}

func addNodeRow(t *cmdutil.TablePrinter, ios *cmdutil.IOStreams, now time.Time, n api.Node) {
	t.AddField(n.Name)
	t.AddField(n.ID)
	t.AddField(n.Shape)
	t.AddField(n.GPUModel)
	t.AddField(n.State, cmdutil.WithColor(nodeStateColor(ios.ColorScheme(), n.State)))
	t.AddField(strconv.Itoa(n.SlotsFree))
	t.AddField(strconv.Itoa(n.SlotsTotal))
	t.AddField(cmdutil.FormatTime(ios, now, n.CreatedAt))
	t.EndRow()
}

// printNodeDetail prints a node and its slots. On a terminal: the node's
// row, then a slots table. Piped: the slots only, one tab-separated row
// each (the node's row is what `node list` prints).
func printNodeDetail(ios *cmdutil.IOStreams, now time.Time, d *api.NodeDetail) error {
	if ios.IsStdoutTTY() {
		t := cmdutil.NewTablePrinter(ios)
		t.AddHeader("name", "id", "shape", "gpu", "state", "free", "total", "created")
		addNodeRow(t, ios, now, d.Node)
		if err := t.Render(); err != nil {
			return err
		}
		fmt.Fprintln(ios.Out)
		if len(d.Slots) == 0 {
			fmt.Fprintln(ios.ErrOut, "No slots discovered yet")
			return nil
		}
	}
	cs := ios.ColorScheme()
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("slot", "index", "state", "numa", "gpu pci", "nvme", "fabric vf", "allocation")
	for _, s := range d.Slots {
		t.AddField(s.ID)
		t.AddField(strconv.Itoa(s.Index))
		t.AddField(s.State, cmdutil.WithColor(slotStateColor(cs, s.State)))
		t.AddField(strconv.Itoa(s.NUMANode))
		t.AddField(s.GPUPCI)
		t.AddField(s.NVMe)
		t.AddField(s.FabricVF)
		t.AddField(s.AllocationID)
		t.EndRow()
	}
	return t.Render()
}

func nodeStateColor(cs cmdutil.ColorScheme, state string) func(string) string {
	switch state {
	case api.NodeReady:
		return cs.Green
	case api.NodeDown:
		return cs.Red
	}
	return cs.Yellow
}

func slotStateColor(cs cmdutil.ColorScheme, state string) func(string) string {
	switch state {
	case api.SlotFree:
		return cs.Green
	case api.SlotPending:
		return cs.Yellow
	case api.SlotDisabled:
		return cs.Gray
	}
	return func(s string) string { return s }
}
