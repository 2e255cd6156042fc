package user

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// AddOptions are the inputs of `gpuaas admin user add`.
type AddOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	Email string
	Name  string
	Role  string
}

// NewCmdAdd builds `gpuaas admin user add`; runF replaces addRun in tests.
func NewCmdAdd(f *cmdutil.Factory, runF func(context.Context, *AddOptions) error) *cobra.Command {
	opts := &AddOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "add EMAIL [--role user|operator|admin] [--name NAME]",
		Short: "Add a local user and print their invite code",
		Long: `Add a local user without a password and print a one-time invite code
(valid for 7 days). The user sets their password and logs in with
` + "`gpuaas login --invite CODE`" + `. Only a hash of the code is kept: it is shown
this once; ` + "`gpuaas admin user invite`" + ` makes a new one. The user can be added
to projects right away.`,
		Example: `  gpuaas admin user add ada@example.com --name "Ada Lovelace"
  gpuaas admin user add ops@example.com --role operator --json invite --jq .invite.code`,
		Args: cmdutil.ExactArgs(1, "an email address"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Email = strings.TrimSpace(args[0])
			switch opts.Role {
			case api.RoleUser, api.RoleOperator, api.RoleAdmin:
			default:
				return cmdutil.FlagErrorf("--role must be user, operator or admin, not %q", opts.Role)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return addRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Role, "role", api.RoleUser, "Platform role: user, operator or admin")
	cmd.Flags().StringVar(&opts.Name, "name", "", "Display name")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.UserInviteResponse{}))
	return cmd
}

func addRun(ctx context.Context, opts *AddOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	r, err := client.AdminUserAdd(ctx, api.UserAddRequest{Email: opts.Email, Name: opts.Name, Role: opts.Role})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, r)
	}
	return printInvite(opts.IO, "Added", r)
}
