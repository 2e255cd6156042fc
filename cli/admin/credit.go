package admin

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// CreditOptions are the inputs of `gpuaas admin credit`.
type CreditOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	// Project is the global --project as given on the command line: a
	// manual adjustment never falls back to a default project.
	Project     string
	Amount      string
	AmountMinor int64
	Reason      string
}

// NewCmdCredit builds `gpuaas admin credit`; runF replaces creditRun in tests.
func NewCmdCredit(f *cmdutil.Factory, runF func(context.Context, *CreditOptions) error) *cobra.Command {
	opts := &CreditOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "credit --project PROJECT --amount AMOUNT --reason REASON",
		Short: "Credit or debit a project's balance by hand",
		Long: `Record a manual adjustment of a project's balance: a positive --amount
credits, a negative one debits. The reason is required; it is kept with the
ledger entry and in the audit log. --project must be given explicitly.`,
		Example: `  gpuaas admin credit --project ml-team --amount 25 --reason "outage 2030-01-09"
  gpuaas admin credit --project ml-team --amount=-10 --reason "duplicate credit"`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Project = f.Flags.Project
			if opts.Project == "" {
				return cmdutil.FlagErrorf("--project is required: an adjustment never goes to the default project")
			}
			if opts.Amount == "" {
				return cmdutil.FlagErrorf("--amount is required: positive credits, negative debits")
			}
			v, err := api.ParseMinor(opts.Amount)
			if err != nil {
				return cmdutil.FlagErrorf("--amount: %v", err)
			}
			if v == 0 {
				return cmdutil.FlagErrorf("--amount must not be zero")
			}
			opts.AmountMinor = v
			if strings.TrimSpace(opts.Reason) == "" {
				return cmdutil.FlagErrorf("--reason is required: it goes to the audit log")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return creditRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Amount, "amount", "", "Amount, e.g. 25 or -10.50 (required)")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "Why, for the ledger and the audit log (required)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.CreditResponse{}))
	return cmd
}

func creditRun(ctx context.Context, opts *CreditOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	r, err := client.AdminCredit(ctx, api.CreditRequest{Project: opts.Project, AmountMinor: opts.AmountMinor, Reason: opts.Reason})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, r)
	}
	if !opts.IO.IsStdoutTTY() {
		_, err := fmt.Fprintf(opts.IO.Out, "%d\t%s\t%d\t%d\t%s\n", r.LedgerEntryID, r.ProjectID, r.AmountMinor, r.BalanceMinor, r.Currency)
		return err
	}
	verb := "Credited %s to"
	amount := r.AmountMinor
	if amount < 0 {
		verb, amount = "Debited %s from", -amount
	}
	_, err = fmt.Fprintf(opts.IO.Out, verb+" project %s (entry %d); balance now %s\n",
		api.FormatMoney(amount, r.Currency), r.ProjectID, r.LedgerEntryID, api.FormatMoney(r.BalanceMinor, r.Currency))
	return err
}
