package volume

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// GetOptions are the inputs of `gpuaas volume get`.
type GetOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Volume string
}

// NewCmdGet builds `gpuaas volume get`; runF replaces getRun in tests.
func NewCmdGet(f *cmdutil.Factory, runF func(context.Context, *GetOptions) error) *cobra.Command {
	opts := &GetOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "get NAME|ID",
		Short: "Show a volume",
		Args:  cmdutil.ExactArgs(1, "a volume name or ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Volume = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return getRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Volume{}))
	return cmd
}

func getRun(ctx context.Context, opts *GetOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	v, err := client.VolumeGet(ctx, api.VolumeRef{Volume: opts.Volume})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, v)
	}
	return printVolumes(opts.IO, opts.Now(), []api.Volume{*v})
}
