package image

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// NewCmdRetire builds `gpuaas image retire`; runF replaces retireRun in tests.
func NewCmdRetire(f *cmdutil.Factory, runF func(context.Context, *ChangeOptions) error) *cobra.Command {
	cmd, _ := changeCmd(f, &cobra.Command{
		Use:   "retire IMAGE",
		Short: "Retire an image for good",
		Long:  `Retire an image for good; its row and audit trail stay.`,
	}, runF, retireRun)
	return cmd
}

func retireRun(ctx context.Context, opts *ChangeOptions) error {
	_, err := changeRun(ctx, opts, (*api.Client).ImageRetire)
	return err
}
