package webhook

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// RemoveOptions are the inputs of `gpuaas webhook rm`.
type RemoveOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	ID string
}

// NewCmdRemove builds `gpuaas webhook rm`; runF replaces removeRun in tests.
func NewCmdRemove(f *cmdutil.Factory, runF func(context.Context, *RemoveOptions) error) *cobra.Command {
	opts := &RemoveOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "rm ID",
		Short: "Remove a webhook",
		Long: `Remove a webhook of a project you own. Deliveries not yet delivered are
dropped; delivered ones stay listed until they age out.`,
		Args: cmdutil.ExactArgs(1, "a webhook id (see `gpuaas webhook list`)"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return removeRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Webhook{}))
	return cmd
}

func removeRun(ctx context.Context, opts *RemoveOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	w, err := client.WebhookRemove(ctx, api.WebhookRef{ID: opts.ID})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, w)
	}
	_, err = fmt.Fprintf(opts.IO.ErrOut, "Removed webhook %s (%s)\n", w.ID, w.URL)
	return err
}
