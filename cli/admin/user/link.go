package user

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// LinkOptions are the inputs of `gpuaas admin user link`.
type LinkOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	User    string
	Issuer  string
	Subject string
}

// NewCmdLink builds `gpuaas admin user link`; runF replaces linkRun in tests.
func NewCmdLink(f *cmdutil.Factory, runF func(context.Context, *LinkOptions) error) *cobra.Command {
	opts := &LinkOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "link EMAIL|ID --issuer ISSUER --subject SUBJECT",
		Short: "Link an identity provider's user to an existing account",
		Long: `Link an OIDC identity (the IdP's issuer URL and the user's subject, the
iss and sub of their ID tokens) to an existing account, which may then log
in through the identity provider as well.

gpuaas never takes an IdP user for an existing account on its own: when
the email of someone logging in through the IdP belongs to another account
(a local one, or one linked to another subject because the IdP changed it),
the login is refused and tells them which link to ask an administrator for.
A user has at most one linked identity; linking replaces the previous one.
The change is audited with the previous identity.`,
		Example: `  gpuaas admin user link ada@example.com --issuer https://idp.example.com --subject 248289761001`,
		Args:    cmdutil.ExactArgs(1, "a user (email or id)"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.User = args[0]
			opts.Issuer, opts.Subject = strings.TrimSpace(opts.Issuer), strings.TrimSpace(opts.Subject)
			if opts.Issuer == "" || opts.Subject == "" {
				return cmdutil.FlagErrorf("--issuer and --subject are required")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return linkRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Issuer, "issuer", "", "The identity provider's issuer URL (iss), as its ID tokens carry it (required)")
	cmd.Flags().StringVar(&opts.Subject, "subject", "", "The user's subject at the identity provider (sub) (required)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.AdminUser{}))
	return cmd
}

func linkRun(ctx context.Context, opts *LinkOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	u, err := client.AdminUserLink(ctx, api.UserLinkRequest{User: opts.User, Issuer: opts.Issuer, Subject: opts.Subject})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, u)
	}
	if !opts.IO.IsStdoutTTY() {
		_, err := fmt.Fprintf(opts.IO.Out, "%s\t%s\t%s\t%s\n", u.Email, u.ID, u.OIDCIssuer, u.OIDCSubject)
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Linked %s (%s) to subject %s at %s\n", u.Email, u.ID, u.OIDCSubject, u.OIDCIssuer)
	return err
}
