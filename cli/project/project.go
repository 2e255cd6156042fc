// Package project holds `gpuaas project` and its verbs.
package project

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdProject builds `gpuaas project`.
func NewCmdProject(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "project <command>",
		Short: "Create projects, manage members, pick the default project",
	}
	cmd.AddCommand(
		NewCmdCreate(f, nil),
		NewCmdList(f, nil),
		NewCmdMembers(f, nil),
		NewCmdAddMember(f, nil),
		NewCmdUse(f, nil),
		NewCmdSet(f, nil),
	)
	return cmd
}
