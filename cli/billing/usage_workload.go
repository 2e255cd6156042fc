package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// workloadUsageHelp is the --workload part of `billing usage`'s help.
const workloadUsageHelp = `
With --workload, what each workload of the project used, newest first
(with an ID, that workload only): its running time, from running to its
end (to now while it runs), its GPU-seconds (that time × its allocation's
GPUs), and its share of the allocation's charge over that time, counted
as a job's (pro rata by the second, rounded down once). A workload is
never charged on its own: the allocation's charge is the same with or
without it (docs/apps.md, "Metering"). A workload of an app with a price
of its own (set by operators, docs/apps.md "Prices") is charged that
price for its running time on top: the app column, a ledger entry of
kind app; the total counts shares and app charges. Piped, its columns
are: workload, name, state, allocation, started (RFC 3339, empty if it
never ran), seconds, GPU-seconds, share, app (minor units: cents).`

// workloadUsageArgs allows the workload id of `--workload ID` and, without
// --workload, what next allows.
func workloadUsageArgs(opts *UsageOptions, next cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if !opts.Workload {
			return next(cmd, args)
		}
		switch {
		case len(args) > 1:
			return cmdutil.FlagErrorf("at most one workload id, got %d arguments", len(args))
		case len(args) == 1 && !ids.Valid(ids.Workload, args[0]):
			return cmdutil.FlagErrorf("--workload: %q is not a workload id (w-…; see `gpuaas app ps`)", args[0])
		case opts.Job || opts.Volume || opts.Allocation != "":
			return cmdutil.FlagErrorf("--workload cannot be used with --alloc, --volume or --job")
		}
		if len(args) == 1 {
			opts.WorkloadID = args[0]
		}
		return nil
	}
}

// writeWorkloadUsage prints `billing usage --workload`: with --json the
// workloads' usage; on a terminal a table and the total; piped, one row
// per workload.
func writeWorkloadUsage(ctx context.Context, opts *UsageOptions, resp *api.BillingUsageResponse) error {
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Workloads)
	}
	ios := opts.IO
	tty := ios.IsStdoutTTY()
	if len(resp.Workloads) == 0 {
		if tty {
			fmt.Fprintln(ios.ErrOut, "No workloads yet")
		}
		return nil
	}
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("workload", "name", "state", "allocation", "started", "ran", "gpu-seconds", "share", "app")
	for _, w := range resp.Workloads {
		started := ""
		if w.StartedAt != nil {
			started = w.StartedAt.UTC().Format(time.RFC3339)
			if tty {
				started = cmdutil.FormatTime(ios, opts.Now(), *w.StartedAt)
			}
		}
		ran := fmt.Sprint(w.Seconds)
		if tty {
			ran = (time.Duration(w.Seconds) * time.Second).String()
		}
		t.AddRow(w.WorkloadID, w.Name, w.State, w.AllocationID, started, ran, fmt.Sprint(w.GPUSeconds),
			money(ios, w.AmountMinor, w.Currency), money(ios, w.AppAmountMinor, w.Currency))
	}
	if err := t.Render(); err != nil {
		return err
	}
	if tty {
		fmt.Fprintf(ios.Out, "total %s\n", api.FormatMoney(resp.TotalMinor, resp.Currency))
	}
	return nil
}
