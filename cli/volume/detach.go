package volume

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// DetachOptions are the inputs of `gpuaas volume detach`.
type DetachOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Volume  string
	Alloc   string
	NoWait  bool
	Timeout time.Duration
}

// NewCmdDetach builds `gpuaas volume detach`; runF replaces detachRun in
// tests.
func NewCmdDetach(f *cmdutil.Factory, runF func(context.Context, *DetachOptions) error) *cobra.Command {
	opts := &DetachOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "detach NAME|ID [--alloc ID]",
		Short: "Detach a volume from a running allocation, keeping the allocation",
		Long: `Detach a volume from the running allocation that has it: the node unmounts
it (and removes the ~/NAME link, or unplugs the slice's disk) and the
volume is ready again, for this allocation or another one on its node.
--alloc, when given, must be the allocation that has it.

A volume in use (a file open in it, a process whose working directory is
in it) is not detached: it stays attached and mounted, and the command
fails saying what to close. The command waits until the node is done
(--no-wait returns at once; the volume is "detaching" until then).`,
		Args: cmdutil.ExactArgs(1, "a volume name or ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Volume = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return detachRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Alloc, "alloc", "", "The allocation that has it (checked)")
	cmd.Flags().BoolVar(&opts.NoWait, "no-wait", false, "Return once asked, without waiting for the node")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 5*time.Minute, "How long to wait for the node")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Volume{}))
	return cmd
}

func detachRun(ctx context.Context, opts *DetachOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	v, err := client.VolumeDetach(ctx, api.VolumeDetachRequest{Volume: opts.Volume, Allocation: opts.Alloc})
	if err != nil {
		return err
	}
	from := v.AllocationID
	if !opts.NoWait {
		if v, err = waitFor(ctx, client, v.ID, opts.Timeout, func(v api.Volume) bool { return v.State != api.VolumeDetaching }); err != nil {
			return err
		}
		if v.State != api.VolumeReady {
			return api.Errorf(api.CodeConflict, "volume %s stays attached to %s: %s", v.Name, from, v.Reason)
		}
		fmt.Fprintf(opts.IO.ErrOut, "Volume %s is detached from %s\n", v.Name, from)
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "Volume %s is being detached from %s\n", v.Name, from)
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, v)
	}
	return printVolumes(opts.IO, opts.Now(), []api.Volume{*v})
}
