package app

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// listPiped are app list's columns as --help documents them piped.
var listPiped = []string{"name", "scope", "image", "ref", "lifecycle", "trust", "id"}

// ListOptions are the inputs of `gpuaas app list`.
type ListOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	All bool
}

// NewCmdList builds `gpuaas app list`; runF replaces listRun in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the apps you can run",
		Long: `List the published apps you can run with ` + "`gpuaas app run NAME --alloc ID`" + `:
promoted, their image promoted and verified, the platform's and your
project's own (docs/apps.md, "Publishing apps"). With --all, every app you
may see, whatever its states (operators: every app). ` + "`gpuaas image list`" + `
shows the images; ` + "`gpuaas app ps`" + ` lists your workloads.` + cmdutil.PipedHelp(listPiped...),
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return listRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "Every app you may see, not only the runnable ones")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.App{}))
	return cmd
}

// Runnable reports whether a workload may run img: promoted and verified
// (api.Image.RunRefusal, which controld/workloads refuses any other by).
func Runnable(img api.Image) bool {
	return img.RunRefusal("workload") == nil
}

func listRun(ctx context.Context, opts *ListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.AppList(ctx, api.AppListRequest{All: opts.All})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Apps)
	}
	if len(resp.Apps) == 0 && opts.IO.IsStdoutTTY() {
		fmt.Fprintln(opts.IO.ErrOut, "No apps: operators and project owners publish them (`gpuaas app publish -f app.yaml`)")
		return nil
	}
	tp := cmdutil.NewTablePrinter(opts.IO)
	tp.AddHeader("NAME", "SCOPE", "IMAGE", "REF", "LIFECYCLE", "TRUST", "ID")
	for _, a := range resp.Apps {
		scope := a.Scope
		if a.Project != "" {
			scope = a.Project
		}
		tp.AddRow(a.Name, scope, a.Image, a.Ref, a.Lifecycle, a.Trust, a.ID)
	}
	return tp.Render()
}
