package ops

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// GatewayKeyListOptions are the inputs of `gpuaas ops gateway-key list`.
type GatewayKeyListOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	All bool
}

// NewCmdGatewayKeyList builds `gpuaas ops gateway-key list`; runF replaces
// gatewayKeyListRun in tests.
func NewCmdGatewayKeyList(f *cmdutil.Factory, runF func(context.Context, *GatewayKeyListOptions) error) *cobra.Command {
	opts := &GatewayKeyListOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:     "list [--all]",
		Aliases: []string{"ls"},
		Short:   "List the registered gateway keys",
		Args:    cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return gatewayKeyListRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "Include revoked keys")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.GatewayKey{}))
	return cmd
}

func gatewayKeyListRun(ctx context.Context, opts *GatewayKeyListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.GatewayKeyList(ctx, api.GatewayKeyListRequest{Revoked: opts.All})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Keys)
	}
	return printGatewayKeys(opts.IO, opts.Now(), resp.Keys)
}
