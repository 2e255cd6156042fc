package image

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// NewCmdPromote builds `gpuaas image promote`; runF replaces promoteRun in tests.
func NewCmdPromote(f *cmdutil.Factory, runF func(context.Context, *ChangeOptions) error) *cobra.Command {
	cmd, _ := changeCmd(f, &cobra.Command{
		Use:   "promote IMAGE",
		Short: "Offer a verified image to users",
		Long:  `Offer a verified image: platform images to every user (operators), a project's own to its members (its owners). Only a verified image is promoted.`,
	}, runF, promoteRun)
	return cmd
}

func promoteRun(ctx context.Context, opts *ChangeOptions) error {
	_, err := changeRun(ctx, opts, (*api.Client).ImagePromote)
	return err
}
