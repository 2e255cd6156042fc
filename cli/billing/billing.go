// Package billing holds `gpuaas billing` and its verbs: the project's
// balance, its ledger and its usage.
package billing

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdBilling builds `gpuaas billing`.
func NewCmdBilling(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "billing <command>",
		Short: "See the project's balance, ledger and usage; top it up",
		Long: `Every project has a prepaid account. Active allocations are charged every
billing window (a minute by default) at their SKU's price per GPU-hour, to
the second; the final partial window is charged when the release is asked
for. Below the project's low-balance threshold its members are warned once;
when the balance runs out they are told, and after a grace period every
allocation of the project is released.`,
	}
	cmd.AddCommand(
		NewCmdBalance(f, nil),
		NewCmdLedger(f, nil),
		NewCmdUsage(f, nil),
		NewCmdTopup(f),
		NewCmdBudget(f),
	)
	return cmd
}
