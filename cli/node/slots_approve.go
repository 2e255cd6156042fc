package node

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// SlotsApproveOptions are the inputs of `gpuaas node slots approve`.
type SlotsApproveOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Node  string
	Slots []string // empty: every pending slot
}

// NewCmdSlotsApprove builds `gpuaas node slots approve`; runF replaces
// slotsApproveRun in tests.
func NewCmdSlotsApprove(f *cmdutil.Factory, runF func(context.Context, *SlotsApproveOptions) error) *cobra.Command {
	opts := &SlotsApproveOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "approve NODE [SLOT...]",
		Short: "Approve discovered slots so they can be rented",
		Long: `Approve slots that topology discovery found on a node, making them free for
allocations. With no SLOT ids, every pending slot of the node is approved.`,
		Args: cmdutil.RangeArgs(1, -1, "a node name or ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Node, opts.Slots = args[0], args[1:]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return slotsApproveRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.NodeDetail{}))
	return cmd
}

func slotsApproveRun(ctx context.Context, opts *SlotsApproveOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	d, err := client.SlotsApprove(ctx, api.SlotsApproveRequest{Node: opts.Node, Slots: opts.Slots})
	if err != nil {
		return err
	}
	if len(opts.Slots) == 0 {
		fmt.Fprintf(opts.IO.ErrOut, "Approved the pending slots of %s\n", d.Node.Name)
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "Approved %d slot(s) of %s\n", len(opts.Slots), d.Node.Name)
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, d)
	}
	return printNodeDetail(opts.IO, opts.Now(), d)
}
