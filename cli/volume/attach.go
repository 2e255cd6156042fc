package volume

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// AttachOptions are the inputs of `gpuaas volume attach`.
type AttachOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Volume  string
	Alloc   string
	Path    string
	NoWait  bool
	Timeout time.Duration
}

// NewCmdAttach builds `gpuaas volume attach`; runF replaces attachRun in
// tests.
func NewCmdAttach(f *cmdutil.Factory, runF func(context.Context, *AttachOptions) error) *cobra.Command {
	opts := &AttachOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "attach NAME|ID --alloc ID [--path /data/NAME]",
		Short: "Attach a volume to a running allocation",
		Long: `Attach a ready volume to an allocation that is already running, on the
volume's node: on bare metal it is mounted at the path (default
/data/NAME) for the allocation's user and linked as ~/NAME; in a slice it
is plugged into the VM as a disk and mounted at the same path. The path
lives under /data, /mnt, /workspace, /scratch, /models, /datasets or
/checkpoints, as with alloc create --volume NAME:/path.

The command waits until the node has mounted it (--no-wait returns at
once; the volume is "attaching" until then). Refused, changing nothing: a
volume attached elsewhere, being made, removed or failed; an allocation
that is not active or is on another node; a path in use in the
allocation; a project whose balance does not cover its minimum runway.`,
		Args: cmdutil.ExactArgs(1, "a volume name or ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Volume = args[0]
			if strings.TrimSpace(opts.Alloc) == "" {
				return cmdutil.FlagErrorf("--alloc is required: the running allocation to attach %s to", opts.Volume)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return attachRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Alloc, "alloc", "", "The running allocation's ID")
	cmd.Flags().StringVar(&opts.Path, "path", "", "Where to mount it (default /data/NAME)")
	cmd.Flags().BoolVar(&opts.NoWait, "no-wait", false, "Return once asked, without waiting for the node")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 5*time.Minute, "How long to wait for the node")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Volume{}))
	return cmd
}

func attachRun(ctx context.Context, opts *AttachOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	v, err := client.VolumeAttach(ctx, api.VolumeAttachRequest{Volume: opts.Volume, Allocation: opts.Alloc, Path: opts.Path})
	if err != nil {
		return err
	}
	if !opts.NoWait {
		if v, err = waitFor(ctx, client, v.ID, opts.Timeout, func(v api.Volume) bool { return v.State != api.VolumeAttaching }); err != nil {
			return err
		}
		if v.State != api.VolumeAttached || v.AllocationID != opts.Alloc {
			return api.Errorf(api.CodeConflict, "volume %s was not attached to %s: %s", v.Name, opts.Alloc, v.Reason)
		}
		fmt.Fprintf(opts.IO.ErrOut, "Volume %s is attached to %s at %s\n", v.Name, v.AllocationID, v.MountPath)
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "Volume %s is being attached to %s at %s\n", v.Name, v.AllocationID, v.MountPath)
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, v)
	}
	return printVolumes(opts.IO, opts.Now(), []api.Volume{*v})
}
