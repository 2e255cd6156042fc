package volume

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// CreateOptions are the inputs of `gpuaas volume create`.
type CreateOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Name    string
	Size    string
	Node    string
	Wait    bool
	Timeout time.Duration
	DryRun  bool
}

// NewCmdCreate builds `gpuaas volume create`; runF replaces createRun in tests.
func NewCmdCreate(f *cmdutil.Factory, runF func(context.Context, *CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "create NAME --size SIZE [--node NODE]",
		Short: "Make a persistent volume in the project",
		Long: `Make a volume: a filesystem of SIZE on one node, for the project. SIZE is a
whole number and a unit, M, G or T (binary: 1G is 1024 MiB), from 16M.
The volume lives on --node, or on the node with the most room. Its node
makes it in the background; --wait returns when it is ready.

A volume is charged by the GiB-hour of its size from when it is ready
until it is removed, attached or not, at the catalog's price per
GiB-month (730 hours). With --dry-run, nothing is made: the request is
checked as a create would be (name, size, the node's room) and its price
per month and per hour is shown.`,
		Example: `  gpuaas volume create data --size 100G
  gpuaas volume create data --size 100G --dry-run
  gpuaas volume create ckpt --size 1T --node gpu-07 --wait`,
		Args: cmdutil.ExactArgs(1, "a volume name"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Name = args[0]
			if opts.Size == "" {
				return cmdutil.FlagErrorf("--size is required (as in --size 100G)")
			}
			if _, err := api.ParseVolumeSize(opts.Size); err != nil {
				return cmdutil.FlagErrorf("--size: %v", err)
			}
			if err := api.CheckVolumeName(opts.Name); err != nil {
				return cmdutil.FlagErrorf("%v", err)
			}
			if opts.DryRun && opts.Wait {
				return cmdutil.FlagErrorf("--dry-run makes nothing to --wait for")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return createRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Size, "size", "", "Size, as in 100G or 512M (required)")
	cmd.Flags().StringVar(&opts.Node, "node", "", "Node to keep it on (default: the one with the most room)")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "Wait until the volume is ready")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 10*time.Minute, "With --wait: how long to wait")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "Check and price the volume per month and per hour; make nothing")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, createFields())
	return cmd
}

func createRun(ctx context.Context, opts *CreateOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	if opts.DryRun {
		return quoteRun(ctx, client, opts)
	}
	v, err := client.VolumeCreate(ctx, api.VolumeCreateRequest{Name: opts.Name, Size: opts.Size, Node: opts.Node})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Volume %s (%s) is being made on %s\n", v.Name, v.ID, v.Node)
	if opts.Wait {
		if v, err = waitFor(ctx, client, v.ID, opts.Timeout, func(v api.Volume) bool { return v.State == api.VolumeReady }); err != nil {
			return err
		}
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, v)
	}
	return printVolumes(opts.IO, opts.Now(), []api.Volume{*v})
}
