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
}

// NewCmdBudgetClear builds `gpuaas billing budget clear`; runF replaces
// budgetClearRun in tests.
func NewCmdBudgetClear(f *cmdutil.Factory, runF func(context.Context, *BudgetClearOptions) error) *cobra.Command {
	opts := &BudgetClearOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:     "clear [--user USER]",
		Short:   "Remove the budget of the project or of one user in it",
		Example: `  gpuaas billing budget clear -p ml-team --user ana@example.com`,
		Args:    cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return budgetClearRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.User, "user", "", "Remove the budget of this user (email or id)")
	return cmd
}

func budgetClearRun(ctx context.Context, opts *BudgetClearOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	b, err := client.BillingBudgetClear(ctx, api.BudgetClearRequest{User: opts.User})
	if err != nil {
		return err
	}
	who := "project " + b.Project
	if b.User != "" {
		who = b.User + " in project " + b.Project
	}
	_, err = fmt.Fprintf(opts.IO.ErrOut, "Budget of %s removed.\n", who)
	return err
}
