package user

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// DisableOptions are the inputs of `gpuaas admin user disable`.
type DisableOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	User string
	Yes  bool
}

// NewCmdDisable builds `gpuaas admin user disable`; runF replaces disableRun in tests.
func NewCmdDisable(f *cmdutil.Factory, runF func(context.Context, *DisableOptions) error) *cobra.Command {
	opts := &DisableOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "disable EMAIL|ID [--yes]",
		Short: "Disable a user and end all their sessions",
		Long: `Disable a user: all their sessions end at once (their tokens are refused
from then on, and the gateway and the bus are told), and they can no longer
log in, by password, invite or identity provider, until enabled again.
Their allocations are left alone. You cannot disable yourself, nor the last
active admin. On a terminal you are asked to confirm unless --yes is given.`,
		Example: `  gpuaas admin user disable mallory@example.com --yes`,
		Args:    cmdutil.ExactArgs(1, "a user (email or id)"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.User = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return disableRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "Do not ask for confirmation")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.UserDisableResponse{}))
	return cmd
}

func disableRun(ctx context.Context, opts *DisableOptions) error {
	if !opts.Yes && opts.IO.CanPrompt() {
		ok, err := opts.IO.Confirm(ctx, fmt.Sprintf("Disable %s and end all their sessions?", opts.User))
		if err != nil {
			return err
		}
		if !ok {
			return cmdutil.ErrCancelled
		}
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	r, err := client.AdminUserDisable(ctx, opts.User)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, r)
	}
	if !opts.IO.IsStdoutTTY() {
		_, err := fmt.Fprintf(opts.IO.Out, "%s\t%s\t%s\t%s\n", r.User.Email, r.User.ID, r.User.State, strings.Join(r.RevokedSessions, ","))
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Disabled %s (%s); %d session(s) ended\n", r.User.Email, r.User.ID, len(r.RevokedSessions))
	return err
}
