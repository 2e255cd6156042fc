// Package secret holds `gpuaas secret` and its verbs.
package secret

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdSecret builds `gpuaas secret`: a project's secrets, which a
// job.yaml's env names as secret:NAME (docs/jobs.md "Secrets").
func NewCmdSecret(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret",
		Short: "Store values that jobs read from their environment",
		Long: `A project's secrets: values stored sealed by the platform, which a job's env
names as secret:NAME (docs/jobs.md). A value is written, never read back:
list shows names, who set them, when, their size and a digest.`,
		Args: cmdutil.NoArgs,
	}
	cmd.AddCommand(
		NewCmdSet(f, nil),
		NewCmdList(f, nil),
		NewCmdRemove(f, nil),
	)
	return cmd
}
