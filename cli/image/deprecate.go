package image

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// NewCmdDeprecate builds `gpuaas image deprecate`; runF replaces deprecateRun in tests.
func NewCmdDeprecate(f *cmdutil.Factory, runF func(context.Context, *ChangeOptions) error) *cobra.Command {
	cmd, _ := changeCmd(f, &cobra.Command{
		Use:   "deprecate IMAGE",
		Short: "Stop offering an image",
		Long:  `Mark a published or promoted image deprecated: no longer offered; a promote offers it again.`,
	}, runF, deprecateRun)
	return cmd
}

func deprecateRun(ctx context.Context, opts *ChangeOptions) error {
	_, err := changeRun(ctx, opts, (*api.Client).ImageDeprecate)
	return err
}
