package billing

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdBudget builds `gpuaas billing budget`.
func NewCmdBudget(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "budget <command>",
		Short: "Cap what the project, or one of its users, may spend",
		Long: `A budget caps the spend of a project, or of one user in it (--user), per UTC
calendar period (day, week from Monday, month), and/or its burn: what its
running allocations cost per hour. A create that would take the spend of the
period (usage so far plus the new allocation's first hour) or the burn over a
cap is refused with budget_exceeded (exit 14). Members are told once when the
spend crosses 80 % of the cap and once when it reaches it; with
--release-at-cap the scope's running allocations are then released too.

Project owners and admins set and clear budgets; members read them.`,
	}
	cmd.AddCommand(
		NewCmdBudgetSet(f, nil),
		NewCmdBudgetGet(f, nil),
		NewCmdBudgetClear(f, nil),
	)
	return cmd
}
