// Package job holds `gpuaas job` and its verbs, and `gpuaas run`
// (docs/jobs.md).
package job

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdJob builds `gpuaas job`.
func NewCmdJob(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job <command>",
		Short: "List, follow and cancel jobs (see `gpuaas run`)",
	}
	cmd.AddCommand(
		NewCmdList(f, nil),
		NewCmdGet(f, nil),
		NewCmdWait(f, nil),
		NewCmdCancel(f, nil),
		NewCmdLogs(f, nil),
	)
	return cmd
}
