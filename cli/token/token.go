// Package token holds `gpuaas token` and its verbs: tokens for machines
// (docs/tokens.md).
package token

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdToken builds `gpuaas token`.
func NewCmdToken(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token <command>",
		Short: "Tokens for CI and tools: a role in one project, for a while",
		Long: `A token lets a machine (a CI pipeline, a script) use gpuaas without a login:
set GPUAAS_TOKEN to its secret. It acts as itself, with one role (member or
viewer) in one project, until it expires or is revoked; audit rows name it as
the actor. Project owners create, list and revoke their projects' tokens.
See docs/tokens.md.`,
	}
	cmd.AddCommand(
		NewCmdCreate(f, nil),
		NewCmdList(f, nil),
		NewCmdRevoke(f, nil),
	)
	return cmd
}
