package billing

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// BudgetClearOptions are the inputs of `gpuaas billing budget clear`.
type BudgetClearOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*api.Client, error)
	User   string
	// Period clears only the spend cap of that period.
	Period string
}

// NewCmdBudgetClear builds `gpuaas billing budget clear`; runF replaces
// budgetClearRun in tests.
func NewCmdBudgetClear(f *cmdutil.Factory, runF func(context.Context, *BudgetClearOptions) error) *cobra.Command {
	opts := &BudgetClearOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "clear [--user USER] [--period day|week|month]",
		Short: "Remove the budget of the project or of one user in it",
		Long: `Remove the budget of the project, or of one user in it (owners only).

With --period, only the spend cap of that period goes, which must be the
budget's; its burn cap stays (a budget left with no cap is removed).`,
		Example: `  gpuaas billing budget clear -p ml-team --user ana@example.com
  gpuaas billing budget clear --period day`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if c.Flags().Changed("period") && !api.ValidBudgetPeriod(opts.Period) {
				return cmdutil.FlagErrorf("--period must be day, week or month, got %q", opts.Period)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return budgetClearRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.User, "user", "", "Remove the budget of this user (email or id)")
	cmd.Flags().StringVar(&opts.Period, "period", "", "Remove only the spend cap of this period (day, week or month)")
	return cmd
}

func budgetClearRun(ctx context.Context, opts *BudgetClearOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	b, err := client.BillingBudgetClear(ctx, api.BudgetClearRequest{User: opts.User, Period: opts.Period})
	if err != nil {
		return err
	}
	who := "project " + b.Project
	if b.User != "" {
		who = b.User + " in project " + b.Project
	}
	if b.BurnCapMinorPerHour > 0 && opts.Period != "" {
		_, err = fmt.Fprintf(opts.IO.ErrOut, "The %s spend cap of %s removed; its burn cap of %s/h stays.\n", opts.Period, who,
			api.FormatMoney(b.BurnCapMinorPerHour, b.Currency))
		return err
	}
	_, err = fmt.Fprintf(opts.IO.ErrOut, "Budget of %s removed.\n", who)
	return err
}
