// Package admin holds `gpuaas admin`: money matters that only platform
// admins may touch (refunds, manual adjustments).
package admin

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdAdmin builds `gpuaas admin`.
func NewCmdAdmin(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin <command>",
		Short: "Refund top-ups and adjust balances (admins)",
	}
	cmd.AddCommand(
		NewCmdRefund(f, nil),
		NewCmdCredit(f, nil),
	)
	return cmd
}
