package volume

import (
	"fmt"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// listPiped are the table's columns as --help documents them piped.
var listPiped = []string{"name", "id", "size", "state", "node", "attached to (an allocation ID, or -)", "created (RFC 3339)"}

var header = []string{"name", "id", "size", "state", "node", "attached", "created"}

// printVolumes prints volumes as a table.
func printVolumes(ios *cmdutil.IOStreams, now time.Time, vs []api.Volume) error {
	if len(vs) == 0 && ios.IsStdoutTTY() {
		fmt.Fprintln(ios.ErrOut, "No volumes")
		return nil
	}
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader(header...)
	for _, v := range vs {
		t.AddField(v.Name)
		t.AddField(v.ID)
		t.AddField(sizeOf(v))
		t.AddField(stateOf(v))
		t.AddField(v.Node)
		t.AddField(cmpOr(v.AllocationID, "-"))
		t.AddField(cmdutil.FormatTime(ios, now, v.CreatedAt))
		t.EndRow()
	}
	return t.Render()
}

func sizeOf(v api.Volume) string {
	s := api.FormatVolumeSize(v.SizeBytes)
	if v.ResizingTo != 0 {
		s += " → " + api.FormatVolumeSize(v.ResizingTo)
	}
	return s
}

func stateOf(v api.Volume) string {
	if v.Reason != "" {
		return v.State + " (" + v.Reason + ")"
	}
	return v.State
}

func cmpOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
