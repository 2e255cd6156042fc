package image

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// GetOptions are the inputs of `gpuaas image get`.
type GetOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Image string
	// Project (-p/--project) and Platform (--platform) say where the name
	// is looked up (scopeHelp).
	Project  string
	Platform bool
}

// NewCmdGet builds `gpuaas image get`; runF replaces getRun in tests.
func NewCmdGet(f *cmdutil.Factory, runF func(context.Context, *GetOptions) error) *cobra.Command {
	opts := &GetOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "get IMAGE",
		Short: "Show an image: its digest, lifecycle and trust, and why",
		Long:  "Show an image: its digest, lifecycle and trust, and why.\n\n" + scopeHelp,
		Args:  cmdutil.ExactArgs(1, "an image name or ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Image = args[0]
			opts.Project = f.Flags.Project
			if err := checkScope(opts.Project, opts.Platform); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return getRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Platform, "platform", false, "The platform's image of that name, not your project's")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Image{}))
	return cmd
}

func getRun(ctx context.Context, opts *GetOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	img, err := client.ImageGet(ctx, api.ImageRef{Image: opts.Image, Project: opts.Project, Platform: opts.Platform})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, img)
	}
	return printImage(opts.IO, opts.Now(), *img)
}
