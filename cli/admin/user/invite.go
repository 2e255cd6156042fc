package user

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// InviteOptions are the inputs of `gpuaas admin user invite`.
type InviteOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	User string
}

// NewCmdInvite builds `gpuaas admin user invite`; runF replaces inviteRun in tests.
func NewCmdInvite(f *cmdutil.Factory, runF func(context.Context, *InviteOptions) error) *cobra.Command {
	opts := &InviteOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "invite EMAIL|ID",
		Short: "Print a new invite code for a local user",
		Long: `Print a new one-time invite code for a local user, replacing any earlier
code (which stops working). The user redeems it with
` + "`gpuaas login --invite CODE`" + `. For a user who already has a password this
is a password reset: redeeming it sets the new password and ends the
user's other sessions.`,
		Example: `  gpuaas admin user invite ada@example.com`,
		Args:    cmdutil.ExactArgs(1, "a user (email or id)"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.User = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return inviteRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.UserInviteResponse{}))
	return cmd
}

func inviteRun(ctx context.Context, opts *InviteOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	r, err := client.AdminUserInvite(ctx, opts.User)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, r)
	}
	return printInvite(opts.IO, "Invited", r)
}
