package app

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ChangeOptions are the inputs of the verbs that move a published app's
// lifecycle (promote, deprecate, retire).
type ChangeOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	App string
	// Project is the project named with -p/--project; Platform is
	// --platform: where the name is looked up (scopeFlags).
	Project  string
	Platform bool
}

// changeCall is the client's call of one move.
type changeCall func(*api.Client, context.Context, api.AppRef, ...api.CallOption) (*api.App, error)

func changeCmd(f *cmdutil.Factory, cmd *cobra.Command, runF func(context.Context, *ChangeOptions) error, call changeCall) *cobra.Command {
	opts := &ChangeOptions{IO: f.IOStreams, Client: f.Client}
	cmd.Args = cmdutil.ExactArgs(1, "an app name or ID")
	cmd.RunE = func(c *cobra.Command, args []string) error {
		opts.App = args[0]
		opts.Project = f.Flags.Project
		if err := checkScope(opts.Project, opts.Platform); err != nil {
			return err
		}
		if runF != nil {
			return runF(c.Context(), opts)
		}
		return changeRun(c.Context(), opts, call)
	}
	cmd.Long += "\n\n" + scopeHelp
	cmd.Flags().BoolVar(&opts.Platform, "platform", false, "The platform's app of that name, not your project's")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.App{}))
	return cmd
}

// scopeHelp says how the verbs that name a published app find it.
const scopeHelp = `APP is an app's id, or its name: with -p/--project, that project's app; with
--platform, the platform's; with neither, your project's or the platform's,
and a name that is both is refused naming both: say which.`

// checkScope refuses -p/--project with --platform: an app is one or the
// other's.
func checkScope(project string, platform bool) error {
	if project != "" && platform {
		return cmdutil.FlagErrorf("--platform and -p/--project name different apps: give one")
	}
	return nil
}

func changeRun(ctx context.Context, opts *ChangeOptions, call changeCall) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	app, err := call(client, ctx, api.AppRef{App: opts.App, Project: opts.Project, Platform: opts.Platform})
	if err != nil {
		return err
	}
	return reportApp(ctx, opts.IO, opts.Exporter, *app, "App "+app.Name+" is "+app.Lifecycle)
}

// NewCmdPromote builds `gpuaas app promote`; runF replaces its run in tests.
func NewCmdPromote(f *cmdutil.Factory, runF func(context.Context, *ChangeOptions) error) *cobra.Command {
	return changeCmd(f, &cobra.Command{
		Use:   "promote APP",
		Short: "Offer a published app: app list shows it, app run runs it",
		Long: `Offer a published app whose image is verified: platform apps to every user
(operators and admins), a project's own to its members (its owners).`,
	}, runF, (*api.Client).AppPromote)
}
