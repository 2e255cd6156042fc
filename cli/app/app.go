// Package app holds `gpuaas app` and its verbs: workloads, catalog images
// run as containers on an allocation (docs/apps.md).
package app

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdApp builds `gpuaas app`.
func NewCmdApp(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "app <command>",
		Short: "Run catalog images as containers on your allocations",
		Long: `Run catalog images (` + "`gpuaas image list`" + `) as containers on a bare-metal
allocation, as the allocation's user with rootless podman, and follow, stop
and remove them (docs/apps.md).`,
	}
	cmd.AddCommand(
		NewCmdList(f, nil),
		NewCmdRun(f, nil),
		NewCmdPs(f, nil),
		NewCmdGet(f, nil),
		NewCmdLogs(f, nil),
		NewCmdStop(f, nil),
		NewCmdRm(f, nil),
	)
	return cmd
}
