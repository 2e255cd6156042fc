package app

import (
	"context"
	"slices"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// GetOptions are the inputs of `gpuaas app get`.
type GetOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	ID string
	// Project (-p/--project) and Platform (--platform) say where an app's
	// name is looked up (scopeHelp).
	Project  string
	Platform bool
}

// NewCmdGet builds `gpuaas app get`; runF replaces getRun in tests.
func NewCmdGet(f *cmdutil.Factory, runF func(context.Context, *GetOptions) error) *cobra.Command {
	opts := &GetOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:     "get {WORKLOAD-ID | APP}",
		Aliases: []string{"view"},
		Short:   "Show a workload, or a published app",
		Long: `Show a workload (its ID, w-…): its state, exit code and reason, its image by
digest, its allocation, when it started and ended, and the last lines of its
output the node reported.

Given anything else, show the published app of that name or id: its
lifecycle, its image and that image's trust (an app's trust is its image's),
whether it runs now, and its manifest.

` + scopeHelp,
		Args: cmdutil.ExactArgs(1, "a workload ID or an app name"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
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
	cmd.Flags().BoolVar(&opts.Platform, "platform", false, "The platform's app of that name, not your project's")
	fields := cmdutil.FieldsOf(api.Workload{})
	for _, f := range cmdutil.FieldsOf(api.App{}) {
		if !slices.Contains(fields, f) {
			fields = append(fields, f)
		}
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, fields)
	return cmd
}

func getRun(ctx context.Context, opts *GetOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	if !ids.Valid(ids.Workload, opts.ID) {
		app, err := client.AppDescribe(ctx, api.AppRef{App: opts.ID, Project: opts.Project, Platform: opts.Platform})
		if err != nil {
			return err
		}
		if opts.Exporter != nil {
			return opts.Exporter.Write(ctx, opts.IO, app)
		}
		return printApp(opts.IO, *app)
	}
	w, err := client.AppGet(ctx, opts.ID)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, w)
	}
	return printWorkload(opts.IO, w)
}
