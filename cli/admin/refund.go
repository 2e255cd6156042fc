package admin

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// RefundOptions are the inputs of `gpuaas admin refund`.
type RefundOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	Topup       string
	Amount      string // empty: all that remains refundable
	AmountMinor int64
	Reason      string
	Yes         bool
	// IdempotencyKey, when given, makes a retry of a refund whose answer
	// was lost safe: the same key never refunds twice.
	IdempotencyKey string
}

// NewCmdRefund builds `gpuaas admin refund`; runF replaces refundRun in tests.
func NewCmdRefund(f *cmdutil.Factory, runF func(context.Context, *RefundOptions) error) *cobra.Command {
	opts := &RefundOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "refund TOPUP [--amount AMOUNT] [--yes]",
		Short: "Refund a top-up through Stripe and debit the balance",
		Long: `Refund a paid top-up through Stripe. TOPUP is its Checkout Session (cs_…) or
payment intent (pi_…). The refund is mirrored in the project's ledger as a
debit. Without --amount, all that remains refundable is refunded; a refund
larger than the project's balance is refused (spent credit is not money
back). On a terminal you are asked to confirm unless --yes is given.

If the answer is lost (a timeout), run the command again with the same
--idempotency-key: a key never refunds twice.`,
		Example: `  gpuaas admin refund cs_test_a1b2c3 --reason "duplicate payment"
  gpuaas admin refund pi_3Nx --amount 20 --yes`,
		Args: cmdutil.ExactArgs(1, "a top-up (cs_… or pi_…)"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Topup = args[0]
			if opts.Amount != "" {
				v, err := api.ParseMinor(opts.Amount)
				if err != nil {
					return cmdutil.FlagErrorf("--amount: %v", err)
				}
				if v <= 0 {
					return cmdutil.FlagErrorf("--amount must be more than zero, got %s", opts.Amount)
				}
				opts.AmountMinor = v
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return refundRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Amount, "amount", "", "Amount to refund, e.g. 20 or 12.50 (default: all that remains)")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "Why, for the audit log")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "Do not ask for confirmation")
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Key that makes a retry safe (default: a new one)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.RefundResponse{}))
	return cmd
}

func refundRun(ctx context.Context, opts *RefundOptions) error {
	if !opts.Yes && opts.IO.CanPrompt() {
		what := "all that remains of top-up " + opts.Topup
		if opts.Amount != "" {
			what = opts.Amount + " of top-up " + opts.Topup
		}
		ok, err := opts.IO.Confirm(ctx, fmt.Sprintf("Refund %s through Stripe?", what))
		if err != nil {
			return err
		}
		if !ok {
			return cmdutil.ErrCancelled
		}
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	var callOpts []api.CallOption
	if opts.IdempotencyKey != "" {
		callOpts = append(callOpts, api.WithIdempotencyKey(opts.IdempotencyKey))
	}
	r, err := client.AdminRefund(ctx, api.RefundRequest{Topup: opts.Topup, AmountMinor: opts.AmountMinor, Reason: opts.Reason}, callOpts...)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, r)
	}
	if !opts.IO.IsStdoutTTY() {
		_, err := fmt.Fprintf(opts.IO.Out, "%s\t%s\t%d\t%s\t%d\n", r.RefundID, r.Topup, r.AmountMinor, r.Currency, r.RemainingMinor)
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Refunded %s of top-up %s (refund %s, project %s); %s left refundable\n",
		api.FormatMoney(r.AmountMinor, r.Currency), r.Topup, r.RefundID, r.ProjectID, api.FormatMoney(r.RemainingMinor, r.Currency))
	return err
}
