package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// RetryOptions are the inputs of `gpuaas ops outbox retry`.
type RetryOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	ID int64
}

// NewCmdRetry builds `gpuaas ops outbox retry`; runF replaces retryRun in tests.
func NewCmdRetry(f *cmdutil.Factory, runF func(context.Context, *RetryOptions) error) *cobra.Command {
	opts := &RetryOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "retry ID",
		Short: "Put a dead outbox event back in the relay's queue",
		Long: `Retry a dead outbox event: it is pending again, due at once, with its
attempts reset, and the relay publishes it to the EVENTS stream as it does
any other (consumers are idempotent, so a copy that did arrive before is
harmless). Fix what made it fail first, or it dies again. Admins only;
audited.`,
		Example: `  gpuaas ops outbox retry 4211`,
		Args:    cmdutil.ExactArgs(1, "an outbox event id"),
		RunE: func(c *cobra.Command, args []string) error {
			var err error
			if opts.ID, err = parseID(args[0]); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return retryRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.OutboxEvent{}))
	return cmd
}

func retryRun(ctx context.Context, opts *RetryOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	e, err := client.OutboxRetry(ctx, api.OutboxRef{ID: opts.ID})
	if err != nil {
		return err
	}
	return printChanged(ctx, opts.IO, opts.Exporter, opts.Now(), e, "Retrying outbox event %d (%s): the relay publishes it now\n")
}

// printChanged prints an event retry or drop changed.
func printChanged(ctx context.Context, ios *cmdutil.IOStreams, exp cmdutil.Exporter, now time.Time, e *api.OutboxEvent, tty string) error {
	if exp != nil {
		return exp.Write(ctx, ios, e)
	}
	if !ios.IsStdoutTTY() {
		return printEvents(ios, now, []api.OutboxEvent{*e})
	}
	_, err := fmt.Fprintf(ios.Out, tty, e.ID, e.Kind)
	return err
}
