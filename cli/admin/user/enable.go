package user

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// EnableOptions are the inputs of `gpuaas admin user enable`.
type EnableOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	User string
}

// NewCmdEnable builds `gpuaas admin user enable`; runF replaces enableRun in tests.
func NewCmdEnable(f *cmdutil.Factory, runF func(context.Context, *EnableOptions) error) *cobra.Command {
	opts := &EnableOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "enable EMAIL|ID",
		Short: "Let a disabled user log in again",
		Long: `Enable a disabled user: they may log in again. The sessions that ended
when they were disabled stay ended.`,
		Example: `  gpuaas admin user enable mallory@example.com`,
		Args:    cmdutil.ExactArgs(1, "a user (email or id)"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.User = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return enableRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.AdminUser{}))
	return cmd
}

func enableRun(ctx context.Context, opts *EnableOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	u, err := client.AdminUserEnable(ctx, opts.User)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, u)
	}
	return printUser(opts.IO, "Enabled", u)
}
