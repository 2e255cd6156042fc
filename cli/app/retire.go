package app

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// NewCmdRetire builds `gpuaas app retire`; runF replaces its run in tests.
func NewCmdRetire(f *cmdutil.Factory, runF func(context.Context, *ChangeOptions) error) *cobra.Command {
	return changeCmd(f, &cobra.Command{
		Use:   "retire APP",
		Short: "Retire a published app for good",
		Long: `Retire an app for good: it never runs again and its name stays taken; app run
NAME then means the image of that name, if there is one.`,
	}, runF, (*api.Client).AppRetire)
}
