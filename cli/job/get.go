package job

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// GetOptions are the inputs of `gpuaas job get`.
type GetOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	ID string
}

// NewCmdGet builds `gpuaas job get`; runF replaces getRun in tests.
func NewCmdGet(f *cmdutil.Factory, runF func(context.Context, *GetOptions) error) *cobra.Command {
	opts := &GetOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:     "get ID",
		Aliases: []string{"view"},
		Short:   "Show a job",
		Long: `Show a job: its state, phase, exit code, signal and reason, its allocation
and when it started and ended. Environment values are never shown, only
their names (--json env_names).`,
		Args: cmdutil.ExactArgs(1, "a job ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return getRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Job{}))
	return cmd
}

func getRun(ctx context.Context, opts *GetOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	j, err := client.JobGet(ctx, opts.ID)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, j)
	}
	return printJob(opts.IO, j)
}
