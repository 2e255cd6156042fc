package job

import (
	"context"
	"fmt"
	"io"
	"strings"
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

// parseSince reads --since: a time (RFC 3339) or a duration back from now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, cmdutil.FlagErrorf("invalid --since %q: want a duration back (10m, 2h) or a time (2026-03-01T12:00:00Z)", s)
}

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

// followLogs prints a job's log from req on: the pages there are now, or,
// with follow, until the job ended and its last line was printed. A call
// that fails for want of a controld (a replica restarting, the
// connection back) is tried again from the last line printed. It returns
// the job's state as the last page saw it.
func followLogs(ctx context.Context, client *api.Client, req api.JobLogsRequest, follow bool, print func(api.LogLine) error) (string, error) {
	if follow {
		req.Wait = api.JobLogsMaxWait
	}
	if req.Limit == 0 {
		req.Limit = 1000
	}
	retry, failing := time.Duration(0), time.Time{}
	for {
		p, err := client.JobLogs(ctx, req)
		if err != nil {
			if failing.IsZero() {
				failing = time.Now()
			}
			if !follow || !transient(err) || ctx.Err() != nil || time.Since(failing) > giveUpAfter {
				return "", err
			}
			retry = min(max(2*retry, 250*time.Millisecond), 5*time.Second)
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(retry):
			}
			continue
		}
		retry, failing = 0, time.Time{}
		for _, l := range p.Lines {
			if err := print(l); err != nil {
				return p.State, err
			}
		}
		req.After, req.Cursor = p.After, p.Cursor
		if p.Ended || (!follow && len(p.Lines) == 0) {
			return p.State, nil
		}
		if follow && len(p.Lines) > 0 && len(p.Lines) < req.Limit {
			select {
			case <-ctx.Done():
				return p.State, ctx.Err()
			case <-time.After(api.JobLogsFollowPace):
			}
		}
	}
}

// transient reports whether a call failed for want of a controld (no
// responders and timeouts come back as internal), not because of what it
// asked.
func transient(err error) bool {
	switch api.CodeOf(err) {
	case api.CodeUnavailable, api.CodeInternal, api.CodeRateLimited:
		return true
	}
	return false
}

// giveUpAfter is how long following tries again without an answer.
const giveUpAfter = 2 * time.Minute

// printLogLine prints one line: as JSON through the exporter, or its text
// (made safe for a terminal) on stdout or stderr as the job wrote it.
func printLogLine(ctx context.Context, ios *cmdutil.IOStreams, exp cmdutil.Exporter, l api.LogLine) error {
	if exp != nil {
		return exp.Write(ctx, ios, l)
	}
	var w io.Writer = ios.Out
	if l.Stream != api.LogStdout {
		w = ios.ErrOut
	}
	_, err := fmt.Fprintln(w, safeLine(l.Text))
	return err
}

// safeLine is a line of output fit for a terminal: its tabs kept, every
// other control character shown escaped (api.SanitizeText), since whoever
// reads a project's job log may not be who wrote it.
func safeLine(s string) string {
	parts := strings.Split(s, "\t")
	for i, p := range parts {
		parts[i] = api.SanitizeText(p)
	}
	return strings.Join(parts, "\t")
}
