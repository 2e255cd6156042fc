package project

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/config"
	"github.com/gpuaas/gpuaas/internal/api"
)

// UseOptions are the inputs of `gpuaas project use`.
type UseOptions struct {
	IO     *cmdutil.IOStreams
	Config func() (*config.Config, error)
	Active func() (config.Active, error)
	Client func() (*api.Client, error)

	Project string
}

// NewCmdUse builds `gpuaas project use`; runF replaces useRun in tests.
func NewCmdUse(f *cmdutil.Factory, runF func(context.Context, *UseOptions) error) *cobra.Command {
	opts := &UseOptions{IO: f.IOStreams, Config: f.Config, Active: f.Active, Client: f.Client}
	return &cobra.Command{
		Use:   "use NAME",
		Short: "Set the current context's default project",
		Long: `Set the default project of the current config context, after checking that
you belong to it. --project and GPUAAS_PROJECT still override it per command.`,
		Args: cmdutil.ExactArgs(1, "a project name"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Project = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return useRun(c.Context(), opts)
		},
	}
}

func useRun(ctx context.Context, opts *UseOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.ProjectList(ctx)
	if err != nil {
		return err
	}
	p, ok := findProject(resp.Projects, opts.Project)
	if !ok {
		return &api.Error{Code: api.CodeNotFound, Message: fmt.Sprintf("you are not a member of a project %q", opts.Project),
			Hint: "see `gpuaas project list`"}
	}
	active, err := opts.Active()
	if err != nil {
		return err
	}
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	cfg.UpdateActive(active, func(c *config.Context) { c.Project = p.Name })
	if err := cfg.Save(); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Default project of context %s is now %s\n", active.Name, p.Name)
	return nil
}

// findProject matches a project by name or id.
func findProject(projects []api.Project, nameOrID string) (api.Project, bool) {
	for _, p := range projects {
		if p.Name == nameOrID || p.ID == nameOrID {
			return p, true
		}
	}
	return api.Project{}, false
}
