package app

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// listPiped are app list's columns as --help documents them piped.
var listPiped = []string{"name", "scope", "ref", "size (bytes)", "id"}

// ListOptions are the inputs of `gpuaas app list`.
type ListOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter
}

// NewCmdList builds `gpuaas app list`; runF replaces listRun in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the apps you can run",
		Long: `List the apps you can run with ` + "`gpuaas app run NAME --alloc ID`" + `: the catalog's images
a workload may run now, promoted and verified, the platform's and your
project's own (` + "`gpuaas image list`" + ` shows every image and its state;
` + "`gpuaas app ps`" + ` lists your running workloads).` + cmdutil.PipedHelp(listPiped...),
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return listRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Image{}))
	return cmd
}

// Runnable reports whether a workload may run img: promoted and verified
// (controld/workloads refuses any other).
func Runnable(img api.Image) bool {
	return img.Lifecycle == api.ImagePromoted && img.Trust == api.TrustVerified
}

func listRun(ctx context.Context, opts *ListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.ImageList(ctx, api.ImageListRequest{})
	if err != nil {
		return err
	}
	apps := []api.Image{}
	for _, img := range resp.Images {
		if Runnable(img) {
			apps = append(apps, img)
		}
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, apps)
	}
	if len(apps) == 0 && opts.IO.IsStdoutTTY() {
		fmt.Fprintln(opts.IO.ErrOut, "No apps: an operator publishes, verifies and promotes images (`gpuaas image list`)")
		return nil
	}
	tp := cmdutil.NewTablePrinter(opts.IO)
	tp.AddHeader("NAME", "SCOPE", "REF", "SIZE", "ID")
	for _, img := range apps {
		scope := img.Scope
		if img.Project != "" {
			scope = img.Project
		}
		size := strconv.FormatInt(img.SizeBytes, 10)
		if opts.IO.IsStdoutTTY() {
			size = humanSize(img.SizeBytes)
		}
		tp.AddRow(img.Name, scope, img.Ref, size, img.ID)
	}
	return tp.Render()
}

// humanSize is n bytes for a person, as `image list` prints them.
func humanSize(n int64) string {
	switch {
	case n == 0:
		return "-"
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
