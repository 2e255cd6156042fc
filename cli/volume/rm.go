package volume

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// RemoveOptions are the inputs of `gpuaas volume rm`.
type RemoveOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Volume  string
	Yes     bool
	Wait    bool
	Timeout time.Duration
}

// NewCmdRemove builds `gpuaas volume rm`; runF replaces removeRun in tests.
func NewCmdRemove(f *cmdutil.Factory, runF func(context.Context, *RemoveOptions) error) *cobra.Command {
	opts := &RemoveOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:     "rm NAME|ID [--yes]",
		Aliases: []string{"delete"},
		Short:   "Delete a volume and its data",
		Long: `Delete a volume: its node removes the filesystem and gives its blocks back.
The data cannot be recovered. A volume attached to an allocation is not
deleted (release the allocation first). On a terminal you are asked to
confirm unless --yes is given; --wait returns when the node has removed it.`,
		Args: cmdutil.ExactArgs(1, "a volume name or ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Volume = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return removeRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "Do not ask for confirmation")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "Wait until the node has removed it")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 10*time.Minute, "With --wait: how long to wait")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Volume{}))
	return cmd
}

func removeRun(ctx context.Context, opts *RemoveOptions) error {
	if !opts.Yes && opts.IO.CanPrompt() {
		ok, err := opts.IO.Confirm(ctx, fmt.Sprintf("Delete volume %s and all its data?", opts.Volume))
		if err != nil {
			return err
		}
		if !ok {
			return cmdutil.ErrCancelled
		}
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	v, err := client.VolumeRemove(ctx, api.VolumeRef{Volume: opts.Volume})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Volume %s is being deleted on %s\n", v.Name, v.Node)
	if opts.Wait {
		if v, err = waitFor(ctx, client, v.ID, opts.Timeout, func(v api.Volume) bool { return v.State == api.VolumeDeleted }); err != nil {
			return err
		}
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, v)
	}
	return printVolumes(opts.IO, opts.Now(), []api.Volume{*v})
}
