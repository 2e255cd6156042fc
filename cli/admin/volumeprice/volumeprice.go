// Package volumeprice holds `gpuaas admin volume-price`: the catalog's
// price of a GiB of volume for a month (admins; docs/volumes.md,
// "Billing").
package volumeprice

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdVolumePrice builds `gpuaas admin volume-price`.
func NewCmdVolumePrice(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "volume-price <command>",
		Short: "Set what a GiB of volume costs a month",
		Long: `Volumes are charged by the GiB-hour of their size, at a price per GiB for a
month of 730 hours from the catalog. ` + "`gpuaas volume create --dry-run`" + ` shows it.`,
	}
	cmd.AddCommand(NewCmdSet(f, nil))
	return cmd
}
