package image

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ChangeOptions are the inputs of the verbs that move an image in one of
// its state machines (verify, promote, deprecate, retire, revoke).
type ChangeOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Image  string
	Reason string
	// Project is the project named with -p/--project; Platform is
	// --platform: where the name is looked up (scopeHelp).
	Project  string
	Platform bool
	// NoWait (verify) returns once the verification is queued.
	NoWait bool
}

// changeCmd is the command of one such verb: use and help, and the call
// it makes; run reports its result.
func changeCmd(f *cmdutil.Factory, cmd *cobra.Command, runF func(context.Context, *ChangeOptions) error,
	run func(context.Context, *ChangeOptions) error) (*cobra.Command, *ChangeOptions) {
	opts := &ChangeOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd.Args = cmdutil.ExactArgs(1, "an image name or ID")
	cmd.RunE = func(c *cobra.Command, args []string) error {
		opts.Image = args[0]
		opts.Project = f.Flags.Project
		if err := checkScope(opts.Project, opts.Platform); err != nil {
			return err
		}
		if runF != nil {
			return runF(c.Context(), opts)
		}
		return run(c.Context(), opts)
	}
	cmd.Long += "\n\n" + scopeHelp
	cmd.Flags().BoolVar(&opts.Platform, "platform", false, "The platform's image of that name, not your project's")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Image{}))
	return cmd, opts
}

// scopeHelp says how the verbs that name an image find it.
const scopeHelp = `IMAGE is an image's id, or its name: with -p/--project, that project's image;
with --platform, the platform's; with neither, your project's or the
platform's, and a name that is both is refused naming both: say which.`

// checkScope refuses -p/--project with --platform: an image is one or the
// other's.
func checkScope(project string, platform bool) error {
	if project != "" && platform {
		return cmdutil.FlagErrorf("--platform and -p/--project name different images: give one")
	}
	return nil
}

// changeRun calls one of the client's image changes and reports it.
func changeRun(ctx context.Context, opts *ChangeOptions, call func(*api.Client, context.Context, api.ImageChangeRequest, ...api.CallOption) (*api.Image, error)) (*api.Image, error) {
	client, err := opts.Client()
	if err != nil {
		return nil, err
	}
	img, err := call(client, ctx, api.ImageChangeRequest{Image: opts.Image, Reason: opts.Reason,
		Project: opts.Project, Platform: opts.Platform})
	if err != nil {
		return nil, err
	}
	return img, reportImage(ctx, opts.IO, opts.Exporter, opts.Now(), *img, "Image "+img.Name+" is "+img.StateLine())
}
