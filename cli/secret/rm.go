package secret

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// RemoveOptions are the inputs of `gpuaas secret rm`.
type RemoveOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter
	Name     string
}

// NewCmdRemove builds `gpuaas secret rm`; runF replaces removeRun in tests.
func NewCmdRemove(f *cmdutil.Factory, runF func(context.Context, *RemoveOptions) error) *cobra.Command {
	opts := &RemoveOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a secret",
		Long: `Remove a secret of the project: a job naming it is refused from then on; jobs
already running keep the value they started with.`,
		Args: cmdutil.ExactArgs(1, "the secret's name (see `gpuaas secret list`)"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return removeRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Secret{}))
	return cmd
}

func removeRun(ctx context.Context, opts *RemoveOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	s, err := client.SecretRemove(ctx, api.SecretRemoveRequest{Name: opts.Name})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, s)
	}
	_, err = fmt.Fprintf(opts.IO.ErrOut, "Secret %s removed\n", s.Name)
	return err
}
