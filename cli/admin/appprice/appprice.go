// Package appprice holds `gpuaas admin app-price`: a platform app's own
// price per hour, charged for its workloads' running time on top of their
// allocations' (operators and admins; docs/apps.md, "Prices").
package appprice

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdAppPrice builds `gpuaas admin app-price`.
func NewCmdAppPrice(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "app-price <command>",
		Short: "Set what a platform app costs an hour on top of its allocation",
		Long: `A platform app may cost a price per hour of its own, charged for each of its
workloads' running time on top of the allocation's price, as a ledger entry
of kind app (docs/apps.md, "Prices"). Operators and admins set it; a
project's own apps cost nothing of their own. ` + "`gpuaas app run NAME --dry-run`" + ` shows it.`,
	}
	cmd.AddCommand(NewCmdSet(f, nil), NewCmdList(f, nil))
	return cmd
}
