// Package alloc holds `gpuaas alloc` and its verbs.
package alloc

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdAlloc builds `gpuaas alloc`.
func NewCmdAlloc(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "alloc <command>",
		Aliases: []string{"allocation"},
		Short:   "Rent GPU nodes and slices, list and release them",
	}
	cmd.AddCommand(
		NewCmdCreate(f, nil),
		NewCmdGet(f, nil),
		NewCmdList(f, nil),
		NewCmdRelease(f, nil),
		NewCmdWait(f, nil),
		NewCmdTop(f, nil),
	)
	return cmd
}
