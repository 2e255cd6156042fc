package app

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// LogsOptions are the inputs of `gpuaas app logs`.
type LogsOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter
	Now      func() time.Time

	ID     string
	Follow bool
	Since  string
	After  int64
}

// NewCmdLogs builds `gpuaas app logs`; runF replaces logsRun in tests.
func NewCmdLogs(f *cmdutil.Factory, runF func(context.Context, *LogsOptions) error) *cobra.Command {
	opts := &LogsOptions{IO: f.IOStreams, Client: f.Client, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Show a workload's output; -f follows it while it runs",
		Long: `Show a workload's output, line by line, as its container wrote it: its
standard output here on standard output, its standard error on standard error,
and gpuaas' own marker lines (a bound cut the log, output the node could not
recover) on standard error. Lines are numbered from 1 for the workload's
whole life, across restarts of its node's agent.

With -f, follow the log while the workload runs and return once it ended and
its last line was shown; a dropped connection is resumed after the last line
shown, so no line is lost or shown twice. Logs are kept after the workload
and its allocation end, until their retention ends (docs/apps.md, "Logs").
--since shows only lines written since a time (RFC 3339) or for a duration
back (10m); --after N those after line N. --json prints one object per
line: seq, time, stream, text.`,
		Args: cmdutil.ExactArgs(1, "a workload ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if _, err := cmdutil.ParseLogSince(opts.Since, opts.Now()); err != nil {
				return err
			}
			if opts.After < 0 {
				return cmdutil.FlagErrorf("invalid --after %d: want a line number, 0 or more", opts.After)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return logsRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Follow, "follow", "f", false, "Follow the log until the workload ends")
	cmd.Flags().StringVar(&opts.Since, "since", "", "Only lines written since a time (RFC 3339) or a duration ago (10m)")
	cmd.Flags().Int64Var(&opts.After, "after", 0, "Only lines after this line number (resume where you were)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.LogLine{}))
	return cmd
}

func logsRun(ctx context.Context, opts *LogsOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	since, _ := cmdutil.ParseLogSince(opts.Since, opts.Now())
	print := func(l api.LogLine) error { return cmdutil.PrintLogLine(ctx, opts.IO, opts.Exporter, l) }
	_, err = cmdutil.FollowLogs(ctx, appLogs(client, opts.ID), cmdutil.LogRequest{After: opts.After, Since: since},
		opts.Follow, print, nil)
	return err
}

// appLogs reads pages of workload id's log (app.logs).
func appLogs(client *api.Client, id string) cmdutil.LogFetch {
	return func(ctx context.Context, r cmdutil.LogRequest) (cmdutil.LogPage, error) {
		p, err := client.AppLogs(ctx, api.AppLogsRequest{ID: id, After: r.After, Cursor: r.Cursor, Since: r.Since,
			Limit: r.Limit, Wait: r.Wait})
		if err != nil {
			return cmdutil.LogPage{}, err
		}
		return cmdutil.LogPage{Lines: p.Lines, After: p.After, Cursor: p.Cursor, State: p.State, Ended: p.Ended, More: p.More}, nil
	}
}
