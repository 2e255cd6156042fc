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
		Short: "Publish apps and run them as containers on your allocations",
		Long: `Publish app manifests (` + "`gpuaas app publish`" + `) of catalog images (` + "`gpuaas image list`" + `),
run published apps and catalog images as containers on an allocation, as
the allocation's user with rootless podman, and follow, stop and remove them
(docs/apps.md).`,
	}
	cmd.AddCommand(
		NewCmdList(f, nil),
		NewCmdRun(f, nil),
		NewCmdPs(f, nil),
		NewCmdGet(f, nil),
		NewCmdLogs(f, nil),
		NewCmdStop(f, nil),
		NewCmdRm(f, nil),
		NewCmdPublish(f, nil),
		NewCmdPromote(f, nil),
		NewCmdDeprecate(f, nil),
		NewCmdRetire(f, nil),
	)
	return cmd
}
