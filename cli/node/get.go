package node

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// GetOptions are the inputs of `gpuaas node get`.
type GetOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Node string
}

// NewCmdGet builds `gpuaas node get`; runF replaces getRun in tests.
func NewCmdGet(f *cmdutil.Factory, runF func(context.Context, *GetOptions) error) *cobra.Command {
	opts := &GetOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:     "get NODE",
		Aliases: []string{"view"},
		Short:   "Show a node and its slots",
		Long: `Show a node (by name or id) and its GPU slots. Piped, only the slots are
printed, one per line; use --json for the node too.`,
		Args: cmdutil.ExactArgs(1, "a node name or ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Node = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return getRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.NodeDetail{}))
	return cmd
}

func getRun(ctx context.Context, opts *GetOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	d, err := client.NodeGet(ctx, opts.Node)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, d)
	}
	return printNodeDetail(opts.IO, opts.Now(), d)
}
