package project

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// CreateOptions are the inputs of `gpuaas project create`.
type CreateOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Name string
}

// NewCmdCreate builds `gpuaas project create`; runF replaces createRun in tests.
func NewCmdCreate(f *cmdutil.Factory, runF func(context.Context, *CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a project you own",
		Long: `Create a project owned by you. When you have no default project yet, the
new one becomes your default (see ` + "`gpuaas project use`" + `).`,
		Args: cmdutil.ExactArgs(1, "a project name"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return createRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Project{}))
	return cmd
}

func createRun(ctx context.Context, opts *CreateOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	p, err := client.ProjectCreate(ctx, api.ProjectCreateRequest{Name: opts.Name})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Created project %s\n", p.Name)
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, p)
	}
	return printProjects(opts.IO, opts.Now(), "", []api.Project{*p})
}
