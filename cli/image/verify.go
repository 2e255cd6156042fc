package image

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// NewCmdVerify builds `gpuaas image verify`; runF replaces verifyRun in
// tests.
func NewCmdVerify(f *cmdutil.Factory, runF func(context.Context, *ChangeOptions) error) *cobra.Command {
	cmd, _ := changeCmd(f, &cobra.Command{
		Use:   "verify IMAGE",
		Short: "Check an image against the registry and record the result",
		Long: `Fetch the image's manifest, config and every layer from the registry by digest,
and check them against their descriptors: digests, sizes, and the platform
(linux/amd64). The result is recorded, with the reason of a failure; the
command exits 1 when the image failed.`,
	}, runF, verifyRun)
	return cmd
}

func verifyRun(ctx context.Context, opts *ChangeOptions) error {
	img, err := changeRun(ctx, opts, (*api.Client).ImageVerify)
	if err != nil {
		return err
	}
	if img.Trust != api.TrustVerified {
		return errors.New("image " + img.Name + " failed verification: " + img.TrustReason)
	}
	return nil
}
