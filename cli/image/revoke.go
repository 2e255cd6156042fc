package image

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// NewCmdRevoke builds `gpuaas image revoke`; runF replaces revokeRun in
// tests.
func NewCmdRevoke(f *cmdutil.Factory, runF func(context.Context, *ChangeOptions) error) *cobra.Command {
	cmd, opts := changeCmd(f, &cobra.Command{
		Use:   "revoke IMAGE --reason TEXT",
		Short: "Revoke an image's trust for good",
		Long: `Revoke an image's trust for good: no new workload may use it. Its lifecycle
stays as it is. Operators revoke any image; a project's owners their own.`,
	}, runF, revokeRun)
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why (shown with the image; required)")
	return cmd
}

func revokeRun(ctx context.Context, opts *ChangeOptions) error {
	_, err := changeRun(ctx, opts, (*api.Client).ImageRevoke)
	return err
}
