// Package catalog holds `gpuaas catalog` and its verbs.
package catalog

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdCatalog builds `gpuaas catalog`.
func NewCmdCatalog(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalog <command>",
		Short: "See what can be rented and at what price",
	}
	cmd.AddCommand(NewCmdList(f, nil))
	return cmd
}
