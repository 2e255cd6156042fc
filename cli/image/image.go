// Package image holds `gpuaas image`: the catalog of OCI images pinned by
// digest, their lifecycle and trust (docs/images.md).
package image

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdImage builds `gpuaas image`.
func NewCmdImage(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image <command>",
		Short: "List, publish, verify and promote container images",
		Long: `Container images that run on allocations, pinned by digest. Each has a lifecycle
(published, promoted, deprecated, retired) and, independently, a trust state
(unverified, verified, failed_verification, revoked). Users see the platform's
promoted and verified images and their project's own.`,
	}
	cmd.AddCommand(
		NewCmdList(f, nil),
		NewCmdGet(f, nil),
		NewCmdPublish(f, nil),
		cmdutil.LocalOnly(NewCmdImport(f, nil), "it reads an archive on this machine and pushes it to the registry"),
		NewCmdVerify(f, nil),
		NewCmdPromote(f, nil),
		NewCmdDeprecate(f, nil),
		NewCmdRetire(f, nil),
		NewCmdRevoke(f, nil),
	)
	return cmd
}
