package app

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// PublishOptions are the inputs of `gpuaas app publish`.
type PublishOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	File     string
	Platform bool
}

// NewCmdPublish builds `gpuaas app publish`; runF replaces publishRun in
// tests.
func NewCmdPublish(f *cmdutil.Factory, runF func(context.Context, *PublishOptions) error) *cobra.Command {
	opts := &PublishOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "publish -f app.yaml [--platform]",
		Short: "Publish an app manifest to the catalog",
		Long: `Publish the app manifest app.yaml (docs/apps.md, "Manifests"): its name, its
image (a catalog image's name or id, or REPOSITORY@sha256:… of a catalog
image; stored pinned to that image's digest), command and args, environment,
ports, GPUs, shared memory and readiness probe. The app is published, not yet
runnable: ` + "`gpuaas app promote NAME`" + ` offers it once its image is verified,
and ` + "`gpuaas app run NAME --alloc ID`" + ` then runs its manifest.

The app is your project's own (-p/--project; its owners publish); operators
publish for every project with --platform. controld reads the manifest
strictly: an unknown key, a tag without a digest, a port outside 1024-65535,
an image not in the catalog or another project's, a name already published
or shaped like an id (w-…, app-…, img-…) are refused naming the field, and
nothing is stored.

The manifest's env is public: everyone who can see the app reads it (app get,
app list --json; every user, for a promoted platform app). Never put a token,
password or key there: keep secrets in project secrets (gpuaas secret set),
which a job names as env: {VAR: secret:NAME}; a workload cannot name one yet
(docs/apps.md, "Publishing apps").`,
		Example: `  gpuaas app publish -f jupyter.yaml --platform
  gpuaas app publish -f app.yaml -p research`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.File == "" {
				return cmdutil.FlagErrorf("-f app.yaml is required: the manifest to publish")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return publishRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.File, "file", "f", "", "The app manifest `app.yaml` (docs/apps.md)")
	cmd.Flags().BoolVar(&opts.Platform, "platform", false, "Publish for every project (operators)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.App{}))
	return cmd
}

func publishRun(ctx context.Context, opts *PublishOptions) error {
	data, err := os.ReadFile(opts.File)
	if err != nil {
		return api.Errorf(api.CodeInvalidArgument, "read app manifest: %v", err)
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	app, err := client.AppPublish(ctx, api.AppPublishRequest{Manifest: string(data), Platform: opts.Platform})
	if err != nil {
		return err
	}
	return reportApp(ctx, opts.IO, opts.Exporter, *app, fmt.Sprintf("Published app %s (%s), image %s", app.Name, app.ID, app.Ref))
}

// reportApp says what a change did on stderr and shows the app.
func reportApp(ctx context.Context, ios *cmdutil.IOStreams, exp cmdutil.Exporter, app api.App, status string) error {
	fmt.Fprintln(ios.ErrOut, status)
	if exp != nil {
		return exp.Write(ctx, ios, app)
	}
	return printApp(ios, app)
}
