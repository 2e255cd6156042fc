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
		if runF != nil {
			return runF(c.Context(), opts)
		}
		return run(c.Context(), opts)
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Image{}))
	return cmd, opts
}

// changeRun calls one of the client's image changes and reports it.
func changeRun(ctx context.Context, opts *ChangeOptions, call func(*api.Client, context.Context, api.ImageChangeRequest, ...api.CallOption) (*api.Image, error)) (*api.Image, error) {
	client, err := opts.Client()
	if err != nil {
		return nil, err
	}
	img, err := call(client, ctx, api.ImageChangeRequest{Image: opts.Image, Reason: opts.Reason})
	if err != nil {
		return nil, err
	}
	return img, reportImage(ctx, opts.IO, opts.Exporter, opts.Now(), *img, "Image "+img.Name+" is "+img.StateLine())
}
