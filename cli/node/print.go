package node

import (
	"encoding/json"
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
	t.AddHeader(nodeHeader...)
	for _, n := range nodes {
		addNodeRow(t, ios, now, n)
	}
	return t.Render()
}

var nodeHeader = []string{"name", "id", "shape", "gpu", "state", "used", "free", "pending", "quarantined", "tasks", "heartbeat"}

func addNodeRow(t *cmdutil.TablePrinter, ios *cmdutil.IOStreams, now time.Time, n api.Node) {
	t.AddField(n.Name)
	t.AddField(n.ID)
	t.AddField(n.Shape)
	t.AddField(n.GPUModel)
	t.AddField(n.State, cmdutil.WithColor(nodeStateColor(ios.ColorScheme(), n.State)))
	t.AddField(strconv.Itoa(n.SlotsTotal - n.SlotsFree))
	t.AddField(strconv.Itoa(n.SlotsFree))
	t.AddField(strconv.Itoa(n.SlotsPending))
	t.AddField(strconv.Itoa(n.SlotsQuarantined))
	t.AddField(strconv.Itoa(n.TasksOpen))
	hb := "never"
	if n.LastHeartbeat != nil {
		hb = cmdutil.FormatTime(ios, now, *n.LastHeartbeat)
	}
	t.AddField(hb)
	t.EndRow()
}

func cs(ios *cmdutil.IOStreams) cmdutil.ColorScheme { return ios.ColorScheme() }

// blockers lists what topology discovery found in the way of serving
// slots, from the node's health.
func blockers(n api.Node) []string {
	var h struct {
		Topology struct {
			Blockers []api.Blocker `json:"blockers"`
		} `json:"topology"`
	}
	if len(n.Health) == 0 || json.Unmarshal(n.Health, &h) != nil {
		return nil
	}
	out := make([]string, 0, len(h.Topology.Blockers))
	for _, b := range h.Topology.Blockers {
		line := string(b.Code) + ": " + b.Message
		if b.Device != "" {
			line += " (" + b.Device + ")"
		}
		out = append(out, line)
	}
	return out
}

// printNodeDetail prints a node and its slots. On a terminal: the node's
// row, then a slots table. Piped: the slots only, one tab-separated row
// each (the node's row is what `node list` prints).
func printNodeDetail(ios *cmdutil.IOStreams, now time.Time, d *api.NodeDetail) error {
	if ios.IsStdoutTTY() {
		t := cmdutil.NewTablePrinter(ios)
		t.AddHeader(nodeHeader...)
		addNodeRow(t, ios, now, d.Node)
		if err := t.Render(); err != nil {
			return err
		}
		for _, b := range blockers(d.Node) {
			fmt.Fprintf(ios.Out, "%s %s\n", cs(ios).Red("blocker:"), b)
		}
		for _, v := range d.Volumes {
			fmt.Fprintf(ios.Out, "volume: %s (%s) of project %s, %s, %s\n", v.Name, v.ID, v.ProjectID,
				api.FormatVolumeSize(v.SizeBytes), volumeWhere(v))
		}
		fmt.Fprintln(ios.Out)
		if len(d.Slots) == 0 {
			fmt.Fprintln(ios.ErrOut, "No slots discovered yet")
			return nil
		}
	}
	cs := ios.ColorScheme()
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("slot", "index", "state", "numa", "gpu pci", "nvme", "fabric vf", "allocation", "quarantine", "gpu uuid")
	for _, s := range d.Slots {
		t.AddField(s.ID)
		t.AddField(strconv.Itoa(s.Index))
		t.AddField(s.State, cmdutil.WithColor(slotStateColor(cs, s.State)))
		t.AddField(strconv.Itoa(s.NUMANode))
		t.AddField(s.GPUPCI)
		t.AddField(s.NVMe)
		t.AddField(s.FabricVF)
		t.AddField(s.AllocationID)
		q := ""
		if s.Quarantine != nil {
			q = s.Quarantine.Reason + " (by " + s.Quarantine.By + ", " + cmdutil.FormatTime(ios, now, s.Quarantine.At) + ")"
		}
		t.AddField(q, cmdutil.WithColor(cs.Red))
		t.AddField(s.GPUUUID) // what the driver check compares with (docs/slices.md)
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

// volumeWhere is how an attached volume holds the node (an allocation or
// an sftp session, volumeHold), else its state.
func volumeWhere(v api.Volume) string {
	if h := volumeHold(v); h != "" {
		return h
	}
	return v.State
}
