package job

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ListOptions are the inputs of `gpuaas job list`.
type ListOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	Allocation string
	Limit      int
}

// NewCmdList builds `gpuaas job list`; runF replaces listRun in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List jobs, newest first",
		Long: `List your jobs, or with -p/--project a project's, newest first, with their
state and exit code.` + cmdutil.PipedHelp(listPiped...),
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Limit < 0 || opts.Limit > 500 {
				return cmdutil.FlagErrorf("invalid --limit %d: want 1 to 500", opts.Limit)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return listRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Allocation, "alloc", "", "Only jobs of this allocation")
	cmd.Flags().IntVar(&opts.Limit, "limit", 100, "At most this many jobs")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Job{}))
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.JobList(ctx, api.JobListRequest{AllocationID: opts.Allocation, Limit: opts.Limit})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Jobs)
	}
	return printJobs(opts.IO, resp.Jobs)
}
