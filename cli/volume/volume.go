// Package volume holds `gpuaas volume`: a project's persistent volumes,
// data that outlives the allocations it is attached to (docs/volumes.md).
package volume

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdVolume builds `gpuaas volume`.
func NewCmdVolume(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "volume <command>",
		Short: "Keep data on a node between allocations: persistent volumes",
		Long: `A volume is a filesystem of a fixed size on one node that belongs to a
project and outlives allocations: create it, attach it when you create an
allocation (alloc create --volume NAME) or to one already running
(volume attach), release it or detach the volume, and the data stays for
the next one. Volumes only grow, and are removed only when
no allocation has them.`,
	}
	cmd.AddCommand(
		NewCmdCreate(f, nil),
		NewCmdList(f, nil),
		NewCmdGet(f, nil),
		NewCmdResize(f, nil),
		NewCmdRemove(f, nil),
		NewCmdAttach(f, nil),
		NewCmdDetach(f, nil),
		cmdutil.LocalOnly(NewCmdCp(f, nil), "runs OpenSSH's sftp on this machine"),
		cmdutil.LocalOnly(NewCmdSync(f, nil), "runs OpenSSH on this machine"),
	)
	return cmd
}
