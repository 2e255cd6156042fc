package project

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

// UseOptions are the inputs of `gpuaas project use`.
type UseOptions struct {
	IO     *cmdutil.IOStreams
	Config func() (*clientconfig.Config, error)
	Active func() (clientconfig.Active, error)
	Client func() (*api.Client, error)

	Project string
}

// NewCmdUse builds `gpuaas project use`; runF replaces useRun in tests.
func NewCmdUse(f *cmdutil.Factory, runF func(context.Context, *UseOptions) error) *cobra.Command {
	opts := &UseOptions{IO: f.IOStreams, Config: f.Config, Active: f.Active, Client: f.Client}
	return &cobra.Command{
		Use:   "use NAME",
		Short: "Set your default project",
		Long: `Set your default project: the one commands act in when -p/--project names
none. The server keeps it, so it is the same on every machine you use and
over SSH (ssh gateway alloc list). You must belong to the project.

GPUAAS_PROJECT, and a project pinned in a config context
(` + "`gpuaas context add --project`" + `), still win over it; this command unpins the
current context's project.`,
		Example: `  gpuaas project use ml-team
  ssh gpuaas-dev project use ml-team`,
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
	p, err := client.ProjectUse(ctx, opts.Project)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Your default project is now %s\n", p.Name)
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	active, err := opts.Active()
	if err != nil {
		return err
	}
	// A project pinned in this machine's context goes with every request
	// and would hide the default just set. (Over SSH the config is the
	// session's, in memory, with nothing pinned and no file to save.)
	if stored, ok := cfg.Context(active.Name); ok && stored.Project != "" && cfg.Path() != "" {
		cfg.UpdateContext(active.Name, func(c *clientconfig.Context) { c.Project = "" })
		if err := cfg.Save(); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.ErrOut, "Context %s no longer pins project %s\n", active.Name, stored.Project)
		if active, err = opts.Active(); err != nil {
			return err
		}
	}
	if active.Project != "" && active.Project != p.Name && active.Project != p.ID {
		fmt.Fprintf(opts.IO.ErrOut, "Note: project %s is still set here (GPUAAS_PROJECT or -p/--project) and wins over your default\n",
			active.Project)
	}
	return nil
}
