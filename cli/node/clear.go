package node

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ClearOptions are the inputs of `gpuaas node clear`.
type ClearOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Node string
	Slot *int
	GPU  string
}

// NewCmdClear builds `gpuaas node clear`; runF replaces clearRun in
// tests.
func NewCmdClear(f *cmdutil.Factory, runF func(context.Context, *ClearOptions) error) *cobra.Command {
	opts := &ClearOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	var slot int
	cmd := &cobra.Command{
		Use:   "clear NODE [--slot IDX | --gpu PCI]",
		Short: "Make quarantined GPU slots placeable again",
		Long: `Clear the quarantine of one slot of a node (--slot or --gpu), or of every
quarantined slot of it, so that placement may hand them out again.`,
		Example: `  gpuaas node clear gpu-01 --slot 3
  gpuaas node clear gpu-01`,
		Args: cmdutil.ExactArgs(1, "a node name or ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Node = args[0]
			if c.Flags().Changed("slot") {
				opts.Slot = &slot
			}
			if opts.Slot != nil && opts.GPU != "" {
				return cmdutil.FlagErrorf("name the slot with --slot or --gpu, not both")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return clearRun(c.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&slot, "slot", 0, "Index of the slot")
	cmd.Flags().StringVar(&opts.GPU, "gpu", "", "PCI address of the slot's GPU")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.NodeDetail{}))
	return cmd
}

func clearRun(ctx context.Context, opts *ClearOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	d, err := client.NodeClear(ctx, api.NodeClearRequest{Node: opts.Node, Slot: opts.Slot, GPU: opts.GPU})
	if err != nil {
		return err
	}
	what := "every quarantined slot"
	if opts.Slot != nil || opts.GPU != "" {
		what = slotName(opts.Slot, opts.GPU)
	}
	fmt.Fprintf(opts.IO.ErrOut, "Cleared the quarantine of %s of %s\n", what, d.Node.Name)
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, d)
	}
	return printNodeDetail(opts.IO, opts.Now(), d)
}
