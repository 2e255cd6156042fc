package ops

import (
	"fmt"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// caNames are the CAs a --ca flag accepts.
var caNames = []string{api.CAUser, api.CAHost, api.CAInternal}

func checkCA(name string, optional bool) error {
	if name == "" && optional {
		return nil
	}
	for _, n := range caNames {
		if n == name {
			return nil
		}
	}
	return cmdutil.FlagErrorf("--ca must be user, host or internal, got %q", name)
}

// printKeys prints CA keys as a table.
func printKeys(ios *cmdutil.IOStreams, now time.Time, keys []api.CAKey) error {
	if len(keys) == 0 && ios.IsStdoutTTY() {
		fmt.Fprintln(ios.ErrOut, "No keys")
		return nil
	}
	cs := ios.ColorScheme()
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("ca", "key", "state", "created", "activated")
	for _, k := range keys {
		t.AddField(k.CA)
		t.AddField(k.ID)
		switch {
		case k.RetiredAt != nil:
			t.AddField("retired", cmdutil.WithColor(cs.Gray))
		case k.Active:
			t.AddField("active", cmdutil.WithColor(cs.Green))
		default:
			t.AddField("trusted", cmdutil.WithColor(cs.Yellow))
		}
		t.AddField(cmdutil.FormatTime(ios, now, k.CreatedAt))
		activated := ""
		if k.ActivatedAt != nil {
			activated = cmdutil.FormatTime(ios, now, *k.ActivatedAt)
		}
		t.AddField(activated)
		t.EndRow()
	}
	return t.Render()
}
