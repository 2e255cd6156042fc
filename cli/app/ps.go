package app

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// PsOptions are the inputs of `gpuaas app ps`.
type PsOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	Allocation string
	All        bool
}

// NewCmdPs builds `gpuaas app ps`; runF replaces psRun in tests.
func NewCmdPs(f *cmdutil.Factory, runF func(context.Context, *PsOptions) error) *cobra.Command {
	opts := &PsOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List workloads, newest first",
		Long: `List your project's workloads (or one allocation's with --alloc), newest
first, with their state and exit code; removed ones only with --all.` + cmdutil.PipedHelp(psPiped...),
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return psRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Allocation, "alloc", "", "Only workloads of this allocation")
	cmd.Flags().BoolVarP(&opts.All, "all", "a", false, "Include removed workloads")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Workload{}))
	return cmd
}

func psRun(ctx context.Context, opts *PsOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.AppPs(ctx, api.AppPsRequest{AllocationID: opts.Allocation, All: opts.All})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Workloads)
	}
	return printWorkloads(opts.IO, resp.Workloads)
}
