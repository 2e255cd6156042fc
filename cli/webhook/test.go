package webhook

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestOptions are the inputs of `gpuaas webhook test`.
type TestOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	ID string
}

// NewCmdTest builds `gpuaas webhook test`; runF replaces testRun in tests.
func NewCmdTest(f *cmdutil.Factory, runF func(context.Context, *TestOptions) error) *cobra.Command {
	opts := &TestOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "test ID",
		Short: "Send a webhook.test delivery to a webhook",
		Long: `Queue a delivery of kind webhook.test to a webhook, signed like every other;
follow it with ` + "`gpuaas webhook deliveries --webhook ID`" + `.`,
		Args: cmdutil.ExactArgs(1, "a webhook id (see `gpuaas webhook list`)"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return testRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.WebhookDelivery{}))
	return cmd
}

func testRun(ctx context.Context, opts *TestOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	d, err := client.WebhookTest(ctx, api.WebhookRef{ID: opts.ID})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, d)
	}
	_, err = fmt.Fprintf(opts.IO.ErrOut, "Queued delivery %s to webhook %s\n", d.ID, d.WebhookID)
	return err
}
