package cli

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/daemon"
)

// daemonCommands returns the daemon commands (`gpuaas dev`, `gpuaas
// controld`) added to the root by Main. The SSH gateways they run serve
// NewSSHRootCmd.
func daemonCommands(f *cmdutil.Factory) []*cobra.Command { return daemon.Commands(f, NewSSHRootCmd) }

// Root returns the whole command tree, daemons included, built on f. The
// doc generator uses it.
func Root(f *cmdutil.Factory) *cobra.Command { return NewRootCmd(f, daemonCommands(f)...) }
