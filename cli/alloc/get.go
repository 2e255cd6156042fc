package alloc

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// GetOptions are the inputs of `gpuaas alloc get`.
type GetOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	ID string
}

// NewCmdGet builds `gpuaas alloc get`; runF replaces getRun in tests.
func NewCmdGet(f *cmdutil.Factory, runF func(context.Context, *GetOptions) error) *cobra.Command {
	opts := &GetOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:     "get ID",
		Aliases: []string{"view"},
		Short:   "Show an allocation",
		Long: `Show an allocation: on a terminal its SKU, node, slots, project, cost,
idle policy, place in line when queued, and the timeline of its phases.` + cmdutil.PipedHelp(listPiped...),
		Args: cmdutil.ExactArgs(1, "an allocation ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return getRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Allocation{}))
	return cmd
}

func getRun(ctx context.Context, opts *GetOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	a, err := client.AllocGet(ctx, opts.ID)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, a)
	}
	return printAllocation(opts.IO, opts.Now(), a)
}
