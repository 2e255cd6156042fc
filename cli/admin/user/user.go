// Package user holds `gpuaas admin user`: adding and inviting local
// users, listing, disabling and enabling users, and linking OIDC
// identities (admins).
package user

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdUser builds `gpuaas admin user`.
func NewCmdUser(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user <command>",
		Short: "Add, invite, list, disable, enable and link users",
		Long: `Administer the people who may log in. Local users are added invited:
they get a one-time code and set their own password with
` + "`gpuaas login --invite CODE`" + `. Disabling a user ends all their sessions at
once. Users of an OIDC identity provider appear on their first login; an
account that already exists under their email is linked to their IdP
identity with ` + "`gpuaas admin user link`" + `.`,
	}
	cmd.AddCommand(
		NewCmdAdd(f, nil),
		NewCmdInvite(f, nil),
		NewCmdList(f, nil),
		NewCmdDisable(f, nil),
		NewCmdEnable(f, nil),
		NewCmdLink(f, nil),
	)
	return cmd
}
