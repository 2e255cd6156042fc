// Package node holds `gpuaas node`, the operators' view of GPU hosts.
package node

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdNode builds `gpuaas node`.
func NewCmdNode(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node <command>",
		Short: "Inspect GPU nodes, approve their slots, drain them (operators)",
	}
	slots := &cobra.Command{
		Use:   "slots <command>",
		Short: "Manage a node's GPU slots",
	}
	slots.AddCommand(NewCmdSlotsApprove(f, nil))
	cmd.AddCommand(
		NewCmdList(f, nil),
		NewCmdGet(f, nil),
		NewCmdLogs(f, nil),
		NewCmdDrain(f, nil),
		NewCmdEnroll(f, nil),
		NewCmdQuarantine(f, nil),
		NewCmdClear(f, nil),
		slots,
	)
	return cmd
}
