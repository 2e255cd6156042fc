package billing

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// usageFields are the JSON fields of `billing usage`: an allocation's, and
// with --volume, --job or --workload a volume's, job's or workload's.
func usageFields() []string {
	var fields []string
	for _, row := range []any{api.AllocationUsage{}, api.VolumeUsage{}, api.JobUsage{}, api.WorkloadUsage{}} {
		for _, f := range cmdutil.FieldsOf(row) {
			if !slices.Contains(fields, f) {
				fields = append(fields, f)
			}
		}
	}
	return fields
}

// printVolumeUsage prints `billing usage --volume`: on a terminal, each
// volume's summary and its windows; piped, one row per window.
func printVolumeUsage(ios *cmdutil.IOStreams, resp *api.BillingUsageResponse) error {
	tty := ios.IsStdoutTTY()
	if len(resp.Volumes) == 0 {
		if tty {
			fmt.Fprintln(ios.ErrOut, "No volume has been charged yet")
		}
		return nil
	}
	if !tty {
		t := cmdutil.NewTablePrinter(ios)
		for _, v := range resp.Volumes {
			for _, w := range v.Windows {
				t.AddRow(v.VolumeID, v.Name, w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339), fmt.Sprint(w.Seconds),
					fmt.Sprint(w.SizeBytes), strconv.FormatFloat(w.GiBHours, 'f', 6, 64), fmt.Sprint(w.AmountMinor))
			}
		}
		return t.Render()
	}
	cs := ios.ColorScheme()
	for i, v := range resp.Volumes {
		if i > 0 {
			fmt.Fprintln(ios.Out)
		}
		state := "stopped"
		if v.Running {
			state = "running"
		}
		fmt.Fprintf(ios.Out, "%s  %s, %s at %s per GiB-month (%s): %.2f GiB-hours for %s\n", cs.Bold(v.Name), v.VolumeID,
			api.FormatVolumeSize(v.SizeBytes), api.FormatMoney(v.PricePerGiBMonthMinor, v.Currency), state, v.GiBHours,
			api.FormatMoney(v.AmountMinor, v.Currency))
		t := cmdutil.NewTablePrinter(ios)
		t.AddHeader("start", "end", "seconds", "size", "GiB-hours", "cost")
		for _, w := range v.Windows {
			t.AddRow(w.Start.Local().Format(time.DateTime), w.End.Local().Format(time.DateTime), fmt.Sprint(w.Seconds),
				api.FormatVolumeSize(w.SizeBytes), strconv.FormatFloat(w.GiBHours, 'f', 4, 64),
				api.FormatMoney(w.AmountMinor, v.Currency))
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	fmt.Fprintf(ios.Out, "total %s\n", api.FormatMoney(resp.TotalMinor, resp.Currency))
	return nil
}
