// Package admin holds `gpuaas admin`: what only platform admins may do
// (users, refunds, manual adjustments), and the bootstrap of the first
// admin.
package admin

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/admin/appprice"
	"github.com/gpuaas/gpuaas/cli/admin/user"
	"github.com/gpuaas/gpuaas/cli/admin/volumeprice"
	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdAdmin builds `gpuaas admin`.
func NewCmdAdmin(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin <command>",
		Short: "Administer users, refund top-ups and adjust balances (admins)",
	}
	cmd.AddCommand(
		user.NewCmdUser(f),
		NewCmdBootstrap(f, nil),
		NewCmdRefund(f, nil),
		NewCmdCredit(f, nil),
		volumeprice.NewCmdVolumePrice(f),
		appprice.NewCmdAppPrice(f),
	)
	return cmd
}
