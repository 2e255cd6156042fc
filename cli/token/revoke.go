package token

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// RevokeOptions are the inputs of `gpuaas token revoke`.
type RevokeOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Token string
}

// NewCmdRevoke builds `gpuaas token revoke`; runF replaces revokeRun in tests.
func NewCmdRevoke(f *cmdutil.Factory, runF func(context.Context, *RevokeOptions) error) *cobra.Command {
	opts := &RevokeOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "revoke NAME|ID [-p PROJECT]",
		Short: "Revoke a token: its next request is refused",
		Long: `Revoke a token of a project you own, by id (tk-…) or by name in the project
(-p/--project, else your default project). Requests with it are refused
from then on, on every controld replica, and its connections are closed.`,
		Args: cmdutil.ExactArgs(1, "a token name or id"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Token = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return revokeRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Token{}))
	return cmd
}

func revokeRun(ctx context.Context, opts *RevokeOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	t, err := client.TokenRevoke(ctx, api.TokenRevokeRequest{Token: opts.Token})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Revoked token %s (%s) of %s\n", t.Name, t.ID, t.Project)
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, t)
	}
	return printTokens(opts.IO, opts.Now(), []api.Token{*t})
}
