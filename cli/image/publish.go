package image

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// PublishOptions are the inputs of `gpuaas image publish`.
type PublishOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Name     string
	Ref      string
	Platform bool
}

// NewCmdPublish builds `gpuaas image publish`; runF replaces publishRun in
// tests.
func NewCmdPublish(f *cmdutil.Factory, runF func(context.Context, *PublishOptions) error) *cobra.Command {
	opts := &PublishOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "publish NAME --ref REPOSITORY@sha256:…",
		Short: "Add an image to the catalog, pinned by digest",
		Long: `Add an image to the catalog, unverified. A tag (REPOSITORY:TAG) is resolved to
its digest once, now; only the digest is stored and ever used. A reference
without a registry is in the one controld is configured with.

The image is your project's own; operators publish for everyone with --platform.`,
		Example: `  gpuaas image publish tool --ref 127.0.0.1:5000/research/tool@sha256:…
  gpuaas image publish jupyter --ref registry.example.com/apps/jupyter:7.0 --platform`,
		Args: cmdutil.ExactArgs(1, "a name for the image"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Name = args[0]
			if opts.Ref == "" {
				return cmdutil.FlagErrorf("--ref is required: the image's REPOSITORY@sha256:… or REPOSITORY:TAG")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return publishRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Ref, "ref", "", "the image: `REPOSITORY@sha256:…` or REPOSITORY:TAG")
	cmd.Flags().BoolVar(&opts.Platform, "platform", false, "publish for every project (operators)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Image{}))
	return cmd
}

func publishRun(ctx context.Context, opts *PublishOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	img, err := client.ImagePublish(ctx, api.ImagePublishRequest{Name: opts.Name, Ref: opts.Ref, Platform: opts.Platform})
	if err != nil {
		return err
	}
	return reportImage(ctx, opts.IO, opts.Exporter, opts.Now(), *img, fmt.Sprintf("Published %s as %s", img.Name, img.Ref))
}

// reportImage says what a change did on stderr and shows the image.
func reportImage(ctx context.Context, ios *cmdutil.IOStreams, exp cmdutil.Exporter, now time.Time, img api.Image, status string) error {
	fmt.Fprintln(ios.ErrOut, status)
	if exp != nil {
		return exp.Write(ctx, ios, img)
	}
	return printImage(ios, now, img)
}
