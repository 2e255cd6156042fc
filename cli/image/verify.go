package image

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// verifyPoll is how often `image verify` looks whether its verification
// was recorded.
const verifyPoll = 500 * time.Millisecond

// NewCmdVerify builds `gpuaas image verify`; runF replaces verifyRun in
// tests.
func NewCmdVerify(f *cmdutil.Factory, runF func(context.Context, *ChangeOptions) error) *cobra.Command {
	cmd, opts := changeCmd(f, &cobra.Command{
		Use:   "verify IMAGE",
		Short: "Check an image against the registry and record the result",
		Long: `Fetch the image's manifest, config and every layer from the registry by digest,
and check them against their descriptors: digests, sizes, and the platform
(linux/amd64). The result is recorded, with the reason of a failure; the
command exits 1 when the image failed.

The check runs in controld, not in this command: it is queued, and a
controld replica reads the image however long that takes (a registry that
cannot be reached is retried with backoff; ` + "`gpuaas image get`" + ` shows the last
error). This command waits for the result; with --no-wait it returns once
the check is queued, and interrupting the wait leaves the check running.`,
	}, runF, verifyRun)
	cmd.Flags().BoolVar(&opts.NoWait, "no-wait", false, "Return once the verification is queued")
	return cmd
}

func verifyRun(ctx context.Context, opts *ChangeOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	img, err := client.ImageVerify(ctx, api.ImageChangeRequest{Image: opts.Image})
	if err != nil {
		return err
	}
	if img.Verification != nil && !opts.NoWait {
		if img, err = waitVerified(ctx, opts, client, *img); err != nil {
			return err
		}
	}
	if err := reportImage(ctx, opts.IO, opts.Exporter, opts.Now(), *img, "Image "+img.Name+" is "+img.StateLine()); err != nil {
		return err
	}
	if img.Verification == nil && img.Trust != api.TrustVerified {
		return errors.New("image " + img.Name + " failed verification: " + img.TrustReason)
	}
	return nil
}

// waitVerified polls img until its pending verification is recorded,
// telling the terminal (stderr) of each attempt the registry deferred.
func waitVerified(ctx context.Context, opts *ChangeOptions, client *api.Client, img api.Image) (*api.Image, error) {
	asked := img.Verification.RequestedAt
	lastErr := ""
	t := time.NewTicker(verifyPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the verification of %s (it keeps running; see `gpuaas image get %s`): %w",
				img.Name, img.Name, ctx.Err())
		case <-t.C:
		}
		cur, err := client.ImageGet(ctx, api.ImageRef{Image: img.ID})
		if err != nil {
			return nil, err
		}
		v := cur.Verification
		if v == nil || !v.RequestedAt.Equal(asked) {
			return cur, nil
		}
		if v.LastError != "" && v.LastError != lastErr {
			lastErr = v.LastError
			fmt.Fprintf(opts.IO.ErrOut, "verification of %s deferred (attempt %d): %s; next attempt %s\n",
				img.Name, v.Attempts, api.SanitizeText(v.LastError), v.NextAttemptAt.Local().Format(time.TimeOnly))
		}
	}
}
