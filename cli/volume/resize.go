package volume

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ResizeOptions are the inputs of `gpuaas volume resize`.
type ResizeOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Volume  string
	Size    string
	Wait    bool
	Timeout time.Duration
}

// NewCmdResize builds `gpuaas volume resize`; runF replaces resizeRun in tests.
func NewCmdResize(f *cmdutil.Factory, runF func(context.Context, *ResizeOptions) error) *cobra.Command {
	opts := &ResizeOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "resize NAME|ID --size SIZE",
		Short: "Grow a volume",
		Long: `Grow a volume to SIZE (as in 200G); volumes never shrink. An attached
volume grows while mounted where the node allows it, or when it is next
attached; --wait returns when the node has grown it.`,
		Args: cmdutil.ExactArgs(1, "a volume name or ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Volume = args[0]
			if opts.Size == "" {
				return cmdutil.FlagErrorf("--size is required (as in --size 200G)")
			}
			if _, err := api.ParseVolumeSize(opts.Size); err != nil {
				return cmdutil.FlagErrorf("--size: %v", err)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return resizeRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Size, "size", "", "New size, as in 200G (required)")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "Wait until the node has grown it")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 10*time.Minute, "With --wait: how long to wait")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Volume{}))
	return cmd
}

func resizeRun(ctx context.Context, opts *ResizeOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	v, err := client.VolumeResize(ctx, api.VolumeResizeRequest{Volume: opts.Volume, Size: opts.Size})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Volume %s is growing to %s\n", v.Name, api.FormatVolumeSize(v.ResizingTo))
	if opts.Wait {
		if v, err = waitFor(ctx, client, v.ID, opts.Timeout, func(v api.Volume) bool { return v.ResizingTo == 0 }); err != nil {
			return err
		}
		if v.Reason != "" {
			return fmt.Errorf("volume %s: %s", v.Name, v.Reason)
		}
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, v)
	}
	return printVolumes(opts.IO, opts.Now(), []api.Volume{*v})
}
