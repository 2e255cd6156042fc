package expose

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// RemoveOptions are the inputs of `gpuaas expose rm`.
type RemoveOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter
	Ref      string
}

// NewCmdRemove builds `gpuaas expose rm`; runF replaces removeRun in tests.
func NewCmdRemove(f *cmdutil.Factory, runF func(context.Context, *RemoveOptions) error) *cobra.Command {
	opts := &RemoveOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "rm ID|NAME",
		Short: "Stop serving an exposure",
		Long: `End an exposure: its URL answers 410 from then on. You may end your own; a
project owner may end any of the project's.`,
		Args: cmdutil.ExactArgs(1, "an exposure id or name (see `gpuaas expose list`)"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Ref = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return removeRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Exposure{}))
	return cmd
}

func removeRun(ctx context.Context, opts *RemoveOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	e, err := client.ExposeRemove(ctx, api.ExposeRemoveRequest{Exposure: opts.Ref})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, e)
	}
	_, err = fmt.Fprintf(opts.IO.ErrOut, "Stopped serving port %d of %s (%s)\n", e.Port, e.AllocationID, e.ID)
	return err
}
