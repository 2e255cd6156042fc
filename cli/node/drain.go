package node

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// DrainOptions are the inputs of `gpuaas node drain`.
type DrainOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Node string
}

// NewCmdDrain builds `gpuaas node drain`; runF replaces drainRun in tests.
func NewCmdDrain(f *cmdutil.Factory, runF func(context.Context, *DrainOptions) error) *cobra.Command {
	opts := &DrainOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "drain NODE",
		Short: "Stop placing new allocations on a node",
		Long: `Stop placing new allocations on a node. Allocations already on it keep
running until they are released.`,
		Args: cmdutil.ExactArgs(1, "a node name or ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Node = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return drainRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Node{}))
	return cmd
}

func drainRun(ctx context.Context, opts *DrainOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	n, err := client.NodeDrain(ctx, opts.Node)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Node %s is %s\n", n.Name, n.State)
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, n)
	}
	return printNodes(opts.IO, opts.Now(), []api.Node{*n})
}
