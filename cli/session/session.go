// Package session holds `gpuaas session` and its verbs: the SSH sessions
// the gateway recorded, and their playback.
package session

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdSession builds `gpuaas session`.
func NewCmdSession(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session <command>",
		Short: "List recorded SSH sessions and play them back",
	}
	cmd.AddCommand(
		NewCmdList(f, nil),
		NewCmdPlay(f, nil),
	)
	return cmd
}
