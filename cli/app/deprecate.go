package app

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// NewCmdDeprecate builds `gpuaas app deprecate`; runF replaces its run in
// tests.
func NewCmdDeprecate(f *cmdutil.Factory, runF func(context.Context, *ChangeOptions) error) *cobra.Command {
	return changeCmd(f, &cobra.Command{
		Use:   "deprecate APP",
		Short: "Stop offering a published app",
		Long: `Stop offering a published or promoted app: it leaves app list and no new
workload runs it; workloads running it keep running.`,
	}, runF, (*api.Client).AppDeprecate)
}
