// Package expose holds `gpuaas expose` and its verbs.
package expose

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdExpose builds `gpuaas expose`: the noun's own action serves a
// port (create.go); list and rm are its verbs.
func NewCmdExpose(f *cmdutil.Factory) *cobra.Command {
	cmd := NewCmdCreate(f, nil)
	cmd.AddCommand(
		NewCmdList(f, nil),
		NewCmdRemove(f, nil),
	)
	return cmd
}
