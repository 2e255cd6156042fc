package webhook

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// DeliveriesOptions are the inputs of `gpuaas webhook deliveries`.
type DeliveriesOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Request api.WebhookDeliveriesRequest
}

// NewCmdDeliveries builds `gpuaas webhook deliveries`; runF replaces
// deliveriesRun in tests.
func NewCmdDeliveries(f *cmdutil.Factory, runF func(context.Context, *DeliveriesOptions) error) *cobra.Command {
	opts := &DeliveriesOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "deliveries [--webhook ID] [--state pending|delivered|dead]",
		Short: "List webhook deliveries: state, attempts, the receiver's last answer",
		Long: "List the deliveries of the project's webhooks (or of one), newest first." +
			cmdutil.PipedHelp("id", "webhook id", "event kind", "state", "attempts", "last HTTP status (0: none)",
				"last error", "created (RFC 3339)"),
		Example: `  gpuaas webhook deliveries --state dead
  gpuaas webhook deliveries --webhook wh-7dhachxkfjd0 --json id,state,last_error`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			switch opts.Request.State {
			case "", api.DeliveryPending, api.DeliveryDelivered, api.DeliveryDead:
			default:
				return cmdutil.FlagErrorf("--state must be pending, delivered or dead, got %q", opts.Request.State)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return deliveriesRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Request.Webhook, "webhook", "", "Only this webhook's deliveries")
	cmd.Flags().StringVar(&opts.Request.State, "state", "", "Only deliveries in this state: pending, delivered or dead")
	cmd.Flags().IntVar(&opts.Request.Limit, "limit", 100, "List at most this many")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.WebhookDelivery{}))
	return cmd
}

func deliveriesRun(ctx context.Context, opts *DeliveriesOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	l, err := client.WebhookDeliveries(ctx, opts.Request)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, l.Deliveries)
	}
	if len(l.Deliveries) == 0 && opts.IO.IsStdoutTTY() {
		_, err := opts.IO.ErrOut.Write([]byte("No deliveries\n"))
		return err
	}
	t := cmdutil.NewTablePrinter(opts.IO)
	t.AddHeader("id", "webhook", "event", "state", "attempts", "status", "last error", "created")
	for _, d := range l.Deliveries {
		t.AddRow(d.ID, d.WebhookID, d.EventKind, d.State, fmt.Sprint(d.Attempts), fmt.Sprint(d.LastStatus), d.LastError,
			cmdutil.FormatTime(opts.IO, opts.Now(), d.CreatedAt))
	}
	return t.Render()
}
