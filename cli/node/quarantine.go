package node

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// QuarantineOptions are the inputs of `gpuaas node quarantine`.
type QuarantineOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Node   string
	Slot   *int
	GPU    string
	Reason string
}

// NewCmdQuarantine builds `gpuaas node quarantine`; runF replaces
// quarantineRun in tests.
func NewCmdQuarantine(f *cmdutil.Factory, runF func(context.Context, *QuarantineOptions) error) *cobra.Command {
	opts := &QuarantineOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	var slot int
	cmd := &cobra.Command{
		Use:   "quarantine NODE (--slot IDX | --gpu PCI) --reason TEXT",
		Short: "Keep a GPU slot out of placement",
		Long: `Keep one GPU slot of a node out of placement, named by its index or its GPU's
PCI address. A free slot is no longer handed out; a slot in use stays with
its allocation. controld quarantines a slot by itself when hostd reports a
GPU fault (an XID). ` + "`gpuaas node clear`" + ` makes the slot placeable again.`,
		Example: `  gpuaas node quarantine gpu-01 --slot 3 --reason "fan noise, RMA pending"
  gpuaas node quarantine gpu-01 --gpu 0000:3b:00.0 --reason "ECC errors"`,
		Args: cmdutil.ExactArgs(1, "a node name or ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Node = args[0]
			if c.Flags().Changed("slot") {
				opts.Slot = &slot
			}
			if (opts.Slot == nil) == (opts.GPU == "") {
				return cmdutil.FlagErrorf("name the slot with exactly one of --slot or --gpu")
			}
			if opts.Reason == "" {
				return cmdutil.FlagErrorf("--reason is required")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return quarantineRun(c.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&slot, "slot", 0, "Index of the slot")
	cmd.Flags().StringVar(&opts.GPU, "gpu", "", "PCI address of the slot's GPU")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "Why, one line (required; node get shows it)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.NodeDetail{}))
	return cmd
}

func quarantineRun(ctx context.Context, opts *QuarantineOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	d, err := client.NodeQuarantine(ctx, api.NodeQuarantineRequest{Node: opts.Node, Slot: opts.Slot, GPU: opts.GPU, Reason: opts.Reason})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Quarantined %s of %s\n", slotName(opts.Slot, opts.GPU), d.Node.Name)
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, d)
	}
	return printNodeDetail(opts.IO, opts.Now(), d)
}

func slotName(slot *int, gpu string) string {
	if slot != nil {
		return fmt.Sprintf("slot %d", *slot)
	}
	return "GPU " + gpu
}
