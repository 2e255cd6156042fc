package app

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// LogsOptions are the inputs of `gpuaas app logs`.
type LogsOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	ID string
}

// NewCmdLogs builds `gpuaas app logs`; runF replaces logsRun in tests.
func NewCmdLogs(f *cmdutil.Factory, runF func(context.Context, *LogsOptions) error) *cobra.Command {
	opts := &LogsOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print the last lines of a workload's output",
		Long: `Print the last lines of a workload's output (standard output and error) as
its node last reported them: soon after it started, every 30 seconds while it runs,
and when it ended.`,
		Args: cmdutil.ExactArgs(1, "a workload ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return logsRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.AppLogsResponse{}))
	return cmd
}

func logsRun(ctx context.Context, opts *LogsOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.AppLogs(ctx, opts.ID)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp)
	}
	printLines(opts.IO, resp.Lines)
	return nil
}
