package billing

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TopupOptions are the inputs of `gpuaas billing topup`.
type TopupOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	// Amount is the --amount text; AmountMinor its value in cents.
	Amount      string
	AmountMinor int64
}

// NewCmdTopup builds `gpuaas billing topup`.
func NewCmdTopup(f *cmdutil.Factory) *cobra.Command { return newCmdTopup(f, nil) }

// newCmdTopup builds the command; runF replaces topupRun in tests.
func newCmdTopup(f *cmdutil.Factory, runF func(context.Context, *TopupOptions) error) *cobra.Command {
	opts := &TopupOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "topup --amount AMOUNT",
		Short: "Add credit to the project's balance by card (Stripe Checkout)",
		Long: `Add credit to the project's prepaid balance. This opens a Stripe Checkout
page for the amount and prints its URL; pay there in a browser. The balance
is credited once Stripe confirms the payment, usually within seconds.

--amount is in the platform's currency with at most two decimals (50,
12.50). The platform sets the smallest and largest top-up.`,
		Example: `  gpuaas billing topup --amount 50
  gpuaas billing topup --amount 12.50 --project ml-team
  open "$(gpuaas billing topup --amount 50 --jq .url)"`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Amount == "" {
				return cmdutil.FlagErrorf("--amount is required, e.g. --amount 50")
			}
			v, err := api.ParseMinor(opts.Amount)
			if err != nil {
				return cmdutil.FlagErrorf("--amount: %v", err)
			}
			if v <= 0 {
				return cmdutil.FlagErrorf("--amount must be more than zero, got %s", opts.Amount)
			}
			opts.AmountMinor = v
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return topupRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Amount, "amount", "", "Amount to add, e.g. 50 or 12.50 (required)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.TopupResponse{}))
	return cmd
}

func topupRun(ctx context.Context, opts *TopupOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.BillingTopup(ctx, api.TopupRequest{AmountMinor: opts.AmountMinor})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp)
	}
	if !opts.IO.IsStdoutTTY() {
		_, err := fmt.Fprintln(opts.IO.Out, resp.URL)
		return err
	}
	fmt.Fprintf(opts.IO.Out, "Pay %s at:\n\n  %s\n\n", api.FormatMoney(resp.AmountMinor, resp.Currency), resp.URL)
	fmt.Fprintln(opts.IO.ErrOut, "The balance is credited once Stripe confirms the payment.")
	return nil
}
