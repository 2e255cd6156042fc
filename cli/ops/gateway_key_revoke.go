package ops

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// GatewayKeyRevokeOptions are the inputs of `gpuaas ops gateway-key revoke`.
type GatewayKeyRevokeOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Key string // fingerprint or gateway name
	Yes bool
}

// NewCmdGatewayKeyRevoke builds `gpuaas ops gateway-key revoke`; runF
// replaces gatewayKeyRevokeRun in tests.
func NewCmdGatewayKeyRevoke(f *cmdutil.Factory, runF func(context.Context, *GatewayKeyRevokeOptions) error) *cobra.Command {
	opts := &GatewayKeyRevokeOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "revoke {NAME | FINGERPRINT} [--yes]",
		Short: "Stop certifying a gateway key",
		Long: `Revoke a gateway key: controld certifies it no more, so the gateway
opens no new shells once its current gateway certificate expires (within
the hour). Sessions already open are not cut.

On a terminal you are asked to confirm unless --yes is given.`,
		Example: `  gpuaas ops gateway-key revoke sshgate-1`,
		Args:    cmdutil.ExactArgs(1, "a gateway name or key fingerprint"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Key = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return gatewayKeyRevokeRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "Do not ask for confirmation")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.GatewayKey{}))
	return cmd
}

func gatewayKeyRevokeRun(ctx context.Context, opts *GatewayKeyRevokeOptions) error {
	if !opts.Yes && opts.IO.CanPrompt() {
		ok, err := opts.IO.Confirm(ctx, fmt.Sprintf("Revoke gateway key %s? That gateway opens no new shells within the hour.", opts.Key))
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
	k, err := client.GatewayKeyRevoke(ctx, api.GatewayKeyRef{Key: opts.Key})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, k)
	}
	return printGatewayKeys(opts.IO, opts.Now(), []api.GatewayKey{*k})
}
