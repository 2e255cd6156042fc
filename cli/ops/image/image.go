// Package image holds `gpuaas ops image`: the slice VMs' guest image.
package image

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdImage builds `gpuaas ops image`.
func NewCmdImage(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image <command>",
		Short: "Build the guest image slice VMs boot (GPU hosts)",
	}
	cmd.AddCommand(NewCmdBuild(f, nil))
	return cmd
}
