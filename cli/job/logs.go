package job

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// LogsOptions are the inputs of `gpuaas job logs`.
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

// NewCmdLogs builds `gpuaas job logs`; runF replaces logsRun in tests.
func NewCmdLogs(f *cmdutil.Factory, runF func(context.Context, *LogsOptions) error) *cobra.Command {
	opts := &LogsOptions{IO: f.IOStreams, Client: f.Client, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Show a job's output; -f follows it while it runs",
		Long: `Show a job's output, line by line: what it wrote on standard output here on
standard output, what it wrote on standard error on standard error, and
gpuaas' own marker lines (a bound cut the log, lines were dropped while the
node could not publish them as fast as they came, or could not reach the
bus) on standard error.

With -f, follow the log while the job runs and return once it ended and its
last line was shown; a dropped connection is resumed after the last line
shown, so no line is lost or shown twice. Logs are kept after the job and
its allocation end, until their retention ends (docs/jobs.md, "Logs").
--since shows only lines written since a time (RFC 3339) or for a
duration back (10m); --after N those after line N. --json prints one
object per line: seq, time, stream, text.`,
		Args: cmdutil.ExactArgs(1, "a job ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if _, err := parseSince(opts.Since, opts.Now()); err != nil {
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
	cmd.Flags().BoolVarP(&opts.Follow, "follow", "f", false, "Follow the log until the job ends")
	cmd.Flags().StringVar(&opts.Since, "since", "", "Only lines written since a time (RFC 3339) or a duration ago (10m)")
	cmd.Flags().Int64Var(&opts.After, "after", 0, "Only lines after this line number (resume where you were)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.LogLine{}))
	return cmd
}

// parseSince reads --since (cmdutil.ParseLogSince).
func parseSince(s string, now time.Time) (time.Time, error) { return cmdutil.ParseLogSince(s, now) }

func logsRun(ctx context.Context, opts *LogsOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	since, _ := parseSince(opts.Since, opts.Now())
	print := func(l api.LogLine) error { return printLogLine(ctx, opts.IO, opts.Exporter, l) }
	_, err = followLogs(ctx, client, api.JobLogsRequest{ID: opts.ID, After: opts.After, Since: since}, opts.Follow, print)
	return err
}

// followLogs prints a job's log from req on (cmdutil.FollowLogs): the
// pages there are now, or, with follow, until the job ended and its last
// line was printed. It returns the job's state as the last page saw it.
func followLogs(ctx context.Context, client *api.Client, req api.JobLogsRequest, follow bool, print func(api.LogLine) error) (string, error) {
	fetch := func(ctx context.Context, r cmdutil.LogRequest) (cmdutil.LogPage, error) {
		p, err := client.JobLogs(ctx, api.JobLogsRequest{ID: req.ID, After: r.After, Cursor: r.Cursor, Since: r.Since,
			Limit: r.Limit, Wait: r.Wait})
		if err != nil {
			return cmdutil.LogPage{}, err
		}
		return cmdutil.LogPage{Lines: p.Lines, After: p.After, Cursor: p.Cursor, State: p.State, Ended: p.Ended, More: p.More}, nil
	}
	return cmdutil.FollowLogs(ctx, fetch, cmdutil.LogRequest{After: req.After, Cursor: req.Cursor, Since: req.Since,
		Limit: req.Limit}, follow, print, nil)
}

// printLogLine prints one line (cmdutil.PrintLogLine).
func printLogLine(ctx context.Context, ios *cmdutil.IOStreams, exp cmdutil.Exporter, l api.LogLine) error {
	return cmdutil.PrintLogLine(ctx, ios, exp, l)
}

// safeLine is a line fit for a terminal (cmdutil.SafeLogLine).
func safeLine(s string) string { return cmdutil.SafeLogLine(s) }
