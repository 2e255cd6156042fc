package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// UsageOptions are the inputs of `gpuaas billing usage`.
type UsageOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Allocation string
	Volume     bool
	Windows    int
	// Job and JobID: `--job [ID]` (usage_job.go).
	Job   bool
	JobID string
	// Workload and WorkloadID: `--workload [ID]` (usage_workload.go).
	Workload   bool
	WorkloadID string
}

// NewCmdUsage builds `gpuaas billing usage`; runF replaces usageRun in tests.
func NewCmdUsage(f *cmdutil.Factory, runF func(context.Context, *UsageOptions) error) *cobra.Command {
	opts := &UsageOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "usage [--alloc ID | --volume | --job [ID] | --workload [ID]]",
		Short: "Show what each allocation has cost, or one allocation's charged windows, or the volumes' storage",
		Long: `Show what each allocation of the project has cost while active, most
recent first; with --alloc, that allocation's charged windows. Time is
counted in whole seconds and an allocation's total is
price × GPUs × seconds / 3600, rounded down once.

With --volume, each volume's storage: its GiB-hours of provisioned size
and their cost, then its latest charged windows (--windows, default 60),
each with its size and GiB-hours. A volume costs
price per GiB-month × GiB × seconds / (730 × 3600), rounded down once
per size it had (docs/volumes.md).
` + jobUsageHelp + `
` + workloadUsageHelp + `` +
			cmdutil.PipedHelp("allocation", "sku", "gpus", "started (RFC 3339)", "active (a Go duration; \"(running)\" while it runs)",
				"cost (minor units: cents)") +
			" With --alloc, the columns are: start, end (local time, 2006-01-02 15:04:05), seconds, cost (minor units: cents)." +
			" With --volume, one row per window: volume, name, start, end (RFC 3339), seconds, size (bytes), GiB-hours, cost (minor units: cents).",
		Args: workloadUsageArgs(opts, jobUsageArgs(opts)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkJobUsage(opts); err != nil {
				return err
			}
			if len(args) == 1 && !opts.Workload {
				opts.JobID = args[0]
			}
			if opts.Volume && opts.Allocation != "" {
				return cmdutil.FlagErrorf("--volume and --alloc cannot be used together")
			}
			if opts.Windows < 0 || opts.Windows > 10000 {
				return cmdutil.FlagErrorf("--windows must be within 0..10000")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return usageRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Allocation, "alloc", "", "Only this allocation, window by window")
	cmd.Flags().BoolVar(&opts.Volume, "volume", false, "The volumes' storage: GiB-hours per volume and per window")
	cmd.Flags().IntVar(&opts.Windows, "windows", 0, "With --volume, how many of each volume's latest windows to show (default 60)")
	cmd.Flags().BoolVar(&opts.Job, "job", false, "What each job cost (or job ID's): its allocation's charge over the job's running time")
	cmd.Flags().BoolVar(&opts.Workload, "workload", false, "What each workload used (or workload ID): GPU-seconds and its share of its allocation's charge")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, usageFields())
	return cmd
}

func usageRun(ctx context.Context, opts *UsageOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.BillingUsage(ctx, api.BillingUsageRequest{Allocation: opts.Allocation, Volumes: opts.Volume,
		Windows: opts.Windows, Jobs: opts.Job, Job: opts.JobID, Workloads: opts.Workload, Workload: opts.WorkloadID})
	if err != nil {
		return err
	}
	if opts.Workload {
		return writeWorkloadUsage(ctx, opts, resp)
	}
	if opts.Job {
		return writeJobUsage(ctx, opts, resp)
	}
	if opts.Volume {
		if opts.Exporter != nil {
			return opts.Exporter.Write(ctx, opts.IO, resp.Volumes)
		}
		return printVolumeUsage(opts.IO, resp)
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Usage)
	}
	if opts.Allocation != "" {
		return printWindows(opts.IO, opts.Allocation, resp.Usage)
	}
	return printUsage(opts.IO, opts.Now(), resp)
}

func money(ios *cmdutil.IOStreams, minor int64, currency string) string {
	if ios.IsStdoutTTY() {
		return api.FormatMoney(minor, currency)
	}
	return fmt.Sprint(minor)
}

func printUsage(ios *cmdutil.IOStreams, now time.Time, resp *api.BillingUsageResponse) error {
	if len(resp.Usage) == 0 && ios.IsStdoutTTY() {
		fmt.Fprintln(ios.ErrOut, "No usage yet")
		return nil
	}
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("allocation", "sku", "gpus", "started", "active", "cost")
	for _, u := range resp.Usage {
		t.AddField(u.AllocationID)
		t.AddField(u.SKU)
		t.AddField(fmt.Sprint(u.GPUs))
		t.AddField(cmdutil.FormatTime(ios, now, u.StartedAt))
		active := (time.Duration(u.Seconds) * time.Second).String()
		if u.StoppedAt == nil {
			active += " (running)"
		}
		t.AddField(active)
		t.AddField(money(ios, u.AmountMinor, u.Currency))
		t.EndRow()
	}
	if err := t.Render(); err != nil {
		return err
	}
	if ios.IsStdoutTTY() {
		fmt.Fprintf(ios.Out, "total %s\n", api.FormatMoney(resp.TotalMinor, resp.Currency))
	}
	return nil
}

func printWindows(ios *cmdutil.IOStreams, id string, us []api.AllocationUsage) error {
	if len(us) == 0 {
		if ios.IsStdoutTTY() {
			fmt.Fprintf(ios.ErrOut, "Allocation %s has not been active, so it has cost nothing\n", id)
		}
		return nil
	}
	u := us[0]
	if ios.IsStdoutTTY() {
		fmt.Fprintf(ios.Out, "%s  %s × %s at %s per GPU-hour: %s for %s\n", ios.ColorScheme().Bold(u.AllocationID), fmt.Sprint(u.GPUs),
			u.SKU, api.FormatMoney(u.PricePerGPUHourMinor, u.Currency), api.FormatMoney(u.AmountMinor, u.Currency),
			time.Duration(u.Seconds)*time.Second)
	}
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("start", "end", "seconds", "cost")
	for _, w := range u.Windows {
		t.AddField(w.Start.Local().Format(time.DateTime))
		t.AddField(w.End.Local().Format(time.DateTime))
		t.AddField(fmt.Sprint(w.Seconds))
		t.AddField(money(ios, w.AmountMinor, u.Currency))
		t.EndRow()
	}
	return t.Render()
}
