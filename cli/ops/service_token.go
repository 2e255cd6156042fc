package ops

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ServiceTokenOptions are the inputs of `gpuaas ops service-token`.
type ServiceTokenOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	Name string
	Role string
	TTL  time.Duration
}

// NewCmdServiceToken builds `gpuaas ops service-token`; runF replaces
// serviceTokenRun in tests.
func NewCmdServiceToken(f *cmdutil.Factory, runF func(context.Context, *ServiceTokenOptions) error) *cobra.Command {
	opts := &ServiceTokenOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "service-token --name NAME [--role gateway] [--ttl DURATION]",
		Short: "Issue a token for a service principal such as sshgate",
		Long: `Issue a session token for the service principal NAME@service.gpuaas,
creating it on first use. Service principals have no password and cannot
log in; this token is how they authenticate. sshgate needs one with the
gateway role.

The token is printed once. Issuing another does not revoke earlier ones;
each expires after --ttl (at most a year).`,
		Example: `  gpuaas ops service-token --name sshgate --role gateway --ttl 8760h > /etc/gpuaas/sshgate.token`,
		Args:    cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Name == "" {
				return cmdutil.FlagErrorf("--name is required")
			}
			if opts.Role != api.RoleGateway {
				return cmdutil.FlagErrorf("--role must be gateway, got %q", opts.Role)
			}
			if opts.TTL <= 0 {
				return cmdutil.FlagErrorf("--ttl must be positive, got %s", opts.TTL)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return serviceTokenRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "Name of the service, e.g. sshgate (required)")
	cmd.Flags().StringVar(&opts.Role, "role", api.RoleGateway, "Platform role of the service principal: gateway")
	cmd.Flags().DurationVar(&opts.TTL, "ttl", 8760*time.Hour, "How long the token is valid")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.LoginResponse{}))
	return cmd
}

func serviceTokenRun(ctx context.Context, opts *ServiceTokenOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.ServiceToken(ctx, api.ServiceTokenRequest{Name: opts.Name, Role: opts.Role, TTL: opts.TTL})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp)
	}
	if _, err := fmt.Fprintln(opts.IO.Out, resp.Token); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Token for %s (%s), valid until %s. It is shown only once.\n",
		resp.User.Email, resp.User.Role, resp.ExpiresAt.Local().Format(time.RFC3339))
	return nil
}
