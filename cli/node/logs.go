package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// DefaultLogsPollInterval is how often `node logs -f` asks for new records.
const DefaultLogsPollInterval = 2 * time.Second

// LogsOptions are the inputs of `gpuaas node logs`.
type LogsOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter
	// PollInterval is the wait between polls with --follow.
	PollInterval time.Duration

	Node   string
	Follow bool
	Since  time.Duration
	Limit  int
}

// NewCmdLogs builds `gpuaas node logs`; runF replaces logsRun in tests.
func NewCmdLogs(f *cmdutil.Factory, runF func(context.Context, *LogsOptions) error) *cobra.Command {
	opts := &LogsOptions{IO: f.IOStreams, Client: f.Client, PollInterval: DefaultLogsPollInterval}
	cmd := &cobra.Command{
		Use:   "logs NODE [-f] [--since DURATION]",
		Short: "Show a node's recent hostd logs (operators)",
		Long: `Show the recent log records of a node's hostd (by node name or id), oldest
first. hostd keeps its last 5,000 records (at most 4 MiB) in memory;
controld asks the node for them, so the node must be connected.

Each record is one line: time, level, message and its attributes as
key=value (correlation ids included). With --json, each record is one JSON
object on its own line; --jq and --template apply to each record.

--follow keeps polling the node for new records until interrupted.`,
		Example: `  gpuaas node logs gpu-node-1
  gpuaas node logs gpu-node-1 --since 10m
  gpuaas node logs gpu-node-1 -f --json | jq -c 'select(.level == "ERROR")'`,
		Args: cmdutil.ExactArgs(1, "a node name or ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Node = args[0]
			if opts.Since < 0 {
				return cmdutil.FlagErrorf("--since must be positive")
			}
			if opts.Limit < 0 || opts.Limit > api.MaxNodeLogsLimit {
				return cmdutil.FlagErrorf("--limit must be between 1 and %d", api.MaxNodeLogsLimit)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return logsRun(c.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&opts.Follow, "follow", "f", false, "Keep printing new records until interrupted")
	fl.DurationVar(&opts.Since, "since", 0, "Only records newer than this `duration` (10m, 1h)")
	fl.IntVar(&opts.Limit, "limit", 0, "At most this many of the newest records (default all kept)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.LogRecord{}))
	return cmd
}

func logsRun(ctx context.Context, opts *LogsOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	req := api.NodeLogsRequest{Node: opts.Node, Limit: opts.Limit}
	if opts.Since > 0 {
		req.Since = opts.Since.String()
	}
	// One JSON value per line, even on a terminal (no indenting).
	stream := *opts.IO
	stream.SetStdoutTTY(false)
	for {
		resp, err := client.NodeLogs(ctx, req)
		if err != nil {
			return err
		}
		for _, r := range resp.Records {
			if opts.Exporter != nil {
				err = opts.Exporter.Write(ctx, &stream, r)
			} else {
				err = printLogRecord(opts.IO, r)
			}
			if err != nil {
				return fmt.Errorf("write log record: %w", err)
			}
			req.After = r.Seq
		}
		if !opts.Follow {
			return nil
		}
		// Following: everything after the last record seen, however old.
		req.Since, req.Limit = "", 0
		t := time.NewTimer(opts.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// printLogRecord writes `time level msg key=value…`: local clock time on
// a terminal, RFC 3339 (UTC, with fractions) when piped.
func printLogRecord(ios *cmdutil.IOStreams, r api.LogRecord) error {
	var b strings.Builder
	if ios.IsStdoutTTY() {
		b.WriteString(r.Time.Local().Format("15:04:05.000"))
	} else {
		b.WriteString(r.Time.UTC().Format(time.RFC3339Nano))
	}
	fmt.Fprintf(&b, " %-5s %s", r.Level, r.Msg)
	for _, k := range slices.Sorted(maps.Keys(r.Attrs)) {
		v := r.Attrs[k]
		if v == "" || strings.ContainsAny(v, " \t\"=") {
			v = fmt.Sprintf("%q", v)
		}
		fmt.Fprintf(&b, " %s=%s", k, v)
	}
	b.WriteByte('\n')
	_, err := fmt.Fprint(ios.Out, b.String())
	return err
}
