package project

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

// ListOptions are the inputs of `gpuaas project list`.
type ListOptions struct {
	IO       *cmdutil.IOStreams
	Active   func() (clientconfig.Active, error)
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter
}

// NewCmdList builds `gpuaas project list`; runF replaces listRun in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Active: f.Active, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List your projects",
		Long: "List your projects with your role in each; your default project is highlighted." +
			cmdutil.PipedHelp("name", "id", "role", "created (RFC 3339)"),
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return listRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Project{}))
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.ProjectList(ctx)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Projects)
	}
	current, err := currentProject(ctx, client, opts.Active)
	if err != nil {
		return err
	}
	return printProjects(opts.IO, opts.Now(), current, resp.Projects)
}

// currentProject is the project commands act in when they name none: the
// one set here (-p/--project, GPUAAS_PROJECT, a context's pinned project),
// else the user's default project, which controld keeps.
func currentProject(ctx context.Context, client *api.Client, active func() (clientconfig.Active, error)) (string, error) {
	a, err := active()
	if err != nil {
		return "", err
	}
	if a.Project != "" {
		return a.Project, nil
	}
	who, err := client.Whoami(ctx)
	if err != nil || who.DefaultProject == nil {
		return "", err
	}
	return who.DefaultProject.Name, nil
}
