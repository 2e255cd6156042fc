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

// jobUsageHelp is the --job part of `billing usage`'s help.
const jobUsageHelp = `
With --job, what each job of the project cost, newest first (with an ID,
that job only): the charge of the allocation it ran on over the job's own
running time, from its start to its end (to now while it runs), each
charged window counted pro rata by the second and the sum rounded down
once. The rest of the allocation's charge — provisioning, and the time it
was active before or after the job, as with release: keep or
resources.allocation — is the allocation's (` + "`billing usage --alloc`" + `), not the
job's (docs/jobs.md, "Cost"). A job that never started cost nothing.
Piped, its columns are: job, name, state, allocation, started (RFC 3339,
empty if it never started), seconds, cost (minor units: cents).`

// jobIDPrefix is the prefix of job ids (controld/jobs.IDPrefix).
const jobIDPrefix = "j"

// jobUsageArgs allows the job id of `--job ID` and nothing else. An
// argument that is no job id is refused, so that `--job --json FIELDS`
// reads FIELDS as the field list (cmdutil.AddJSONFlags).
func jobUsageArgs(opts *UsageOptions) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) > 1:
			return cmdutil.FlagErrorf("at most one job id, got %d arguments", len(args))
		case len(args) == 1 && !opts.Job:
			return cmdutil.FlagErrorf("unexpected argument %q: only --job takes one (a job id)", args[0])
		case len(args) == 1 && !ids.Valid(jobIDPrefix, args[0]):
			return cmdutil.FlagErrorf("--job: %q is not a job id (j-…; see `gpuaas job list`)", args[0])
		}
		return nil
	}
}

// checkJobUsage refuses --job with the other views.
func checkJobUsage(opts *UsageOptions) error {
	if opts.Job && (opts.Volume || opts.Allocation != "") {
		return cmdutil.FlagErrorf("--job cannot be used with --alloc or --volume")
	}
	return nil
}

// writeJobUsage prints `billing usage --job`: with --json the jobs'
// usage; on a terminal a table and the total; piped, one row per job.
func writeJobUsage(ctx context.Context, opts *UsageOptions, resp *api.BillingUsageResponse) error {
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Jobs)
	}
	ios := opts.IO
	tty := ios.IsStdoutTTY()
	if len(resp.Jobs) == 0 {
		if tty {
			fmt.Fprintln(ios.ErrOut, "No jobs yet")
		}
		return nil
	}
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("job", "name", "state", "allocation", "started", "ran", "cost")
	for _, j := range resp.Jobs {
		started := ""
		if j.StartedAt != nil {
			started = j.StartedAt.UTC().Format(time.RFC3339)
			if tty {
				started = cmdutil.FormatTime(ios, opts.Now(), *j.StartedAt)
			}
		}
		ran := fmt.Sprint(j.Seconds)
		if tty {
			ran = (time.Duration(j.Seconds) * time.Second).String()
		}
		t.AddRow(j.JobID, j.Name, j.State, j.AllocationID, started, ran, money(ios, j.AmountMinor, j.Currency))
	}
	if err := t.Render(); err != nil {
		return err
	}
	if tty {
		fmt.Fprintf(ios.Out, "total %s\n", api.FormatMoney(resp.TotalMinor, resp.Currency))
	}
	return nil
}
