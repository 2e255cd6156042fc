package webhook

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// RetryOptions are the inputs of `gpuaas webhook retry`.
type RetryOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	ID string
}

// NewCmdRetry builds `gpuaas webhook retry`; runF replaces retryRun in tests.
func NewCmdRetry(f *cmdutil.Factory, runF func(context.Context, *RetryOptions) error) *cobra.Command {
	opts := &RetryOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "retry DELIVERY",
		Short: "Send a dead delivery again",
		Long: `Make a dead delivery pending again, with its attempts reset: it is sent again,
with the same delivery id, until the receiver answers 2xx or the attempts run out.`,
		Args: cmdutil.ExactArgs(1, "a delivery id (see `gpuaas webhook deliveries --state dead`)"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return retryRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.WebhookDelivery{}))
	return cmd
}

func retryRun(ctx context.Context, opts *RetryOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	d, err := client.WebhookRetry(ctx, api.WebhookDeliveryRef{ID: opts.ID})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, d)
	}
	_, err = fmt.Fprintf(opts.IO.ErrOut, "Delivery %s is pending again\n", d.ID)
	return err
}
