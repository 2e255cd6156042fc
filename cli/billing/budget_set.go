package billing

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// BudgetSetOptions are the inputs of `gpuaas billing budget set`.
type BudgetSetOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	User    string
	Period  string
	Amount  string
	BurnCap string
	Release bool

	// Request is what the flags make.
	Request api.BudgetSetRequest
}

// NewCmdBudgetSet builds `gpuaas billing budget set`; runF replaces
// budgetSetRun in tests.
func NewCmdBudgetSet(f *cmdutil.Factory, runF func(context.Context, *BudgetSetOptions) error) *cobra.Command {
	opts := &BudgetSetOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "set [--user USER] [--period day|week|month --amount AMOUNT] [--burn-cap AMOUNT] [--release-at-cap]",
		Short: "Set the budget of the project or of one user in it",
		Long: `Set (or replace) the budget of the project (-p/--project), or of one of its
users (--user, an email or id). --period with --amount caps the spend per UTC
calendar period; --burn-cap caps what the running allocations cost per hour.
Give either or both. Amounts are in the platform's currency with at most two
decimals (1, 0.50). At the cap new allocations are refused; with
--release-at-cap the running ones are released too.`,
		Example: `  gpuaas billing budget set --period day --amount 100
  gpuaas billing budget set -p ml-team --user ana@example.com --period month --amount 500 --release-at-cap
  gpuaas billing budget set --burn-cap 20`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			r := api.BudgetSetRequest{User: opts.User, Period: opts.Period, Action: api.BudgetRefuse}
			if opts.Release {
				r.Action = api.BudgetRelease
			}
			if (opts.Period == "") != (opts.Amount == "") {
				return cmdutil.FlagErrorf("--period and --amount go together, e.g. --period day --amount 100")
			}
			if opts.Period == "" && opts.BurnCap == "" {
				return cmdutil.FlagErrorf("give a spend cap (--period and --amount) and/or a burn cap (--burn-cap)")
			}
			if opts.Period != "" && !api.ValidBudgetPeriod(opts.Period) {
				return cmdutil.FlagErrorf("--period must be day, week or month, got %q", opts.Period)
			}
			var err error
			if r.AmountMinor, err = positiveMoney("--amount", opts.Amount); err != nil {
				return err
			}
			if r.BurnCapMinorPerHour, err = positiveMoney("--burn-cap", opts.BurnCap); err != nil {
				return err
			}
			opts.Request = r
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return budgetSetRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.User, "user", "", "Set the budget of this user (email or id) in the project")
	cmd.Flags().StringVar(&opts.Period, "period", "", "Spend cap period: day, week or month (UTC)")
	cmd.Flags().StringVar(&opts.Amount, "amount", "", "Spend cap per period, e.g. 100 or 12.50")
	cmd.Flags().StringVar(&opts.BurnCap, "burn-cap", "", "Cap on what running allocations cost per hour, e.g. 0.50")
	cmd.Flags().BoolVar(&opts.Release, "release-at-cap", false, "At the spend cap, also release the running allocations")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Budget{}))
	return cmd
}

// positiveMoney parses an optional money flag; "" is zero.
func positiveMoney(flag, v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	m, err := api.ParseMinor(v)
	if err != nil {
		return 0, cmdutil.FlagErrorf("%s: %v", flag, err)
	}
	if m <= 0 {
		return 0, cmdutil.FlagErrorf("%s must be more than zero, got %s (to remove a budget: `gpuaas billing budget clear`)", flag, v)
	}
	return m, nil
}

func budgetSetRun(ctx context.Context, opts *BudgetSetOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	b, err := client.BillingBudgetSet(ctx, opts.Request)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, b)
	}
	return printBudgets(opts.IO, []api.Budget{*b})
}
