package auth

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

// WhoamiOptions are the inputs of `gpuaas whoami`.
type WhoamiOptions struct {
	IO       *cmdutil.IOStreams
	Active   func() (clientconfig.Active, error)
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter
}

// NewCmdWhoami builds `gpuaas whoami`; runF replaces whoamiRun in tests.
func NewCmdWhoami(f *cmdutil.Factory, runF func(context.Context, *WhoamiOptions) error) *cobra.Command {
	opts := &WhoamiOptions{IO: f.IOStreams, Active: f.Active, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show who you are logged in as",
		Args:  cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return whoamiRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.WhoamiResponse{}))
	return cmd
}

func whoamiRun(ctx context.Context, opts *WhoamiOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	me, err := client.Whoami(ctx)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, me)
	}
	active, err := opts.Active()
	if err != nil {
		return err
	}
	return printWhoami(opts.IO, opts.Now(), active, me)
}

// printWhoami prints one labelled value per line: aligned on a terminal,
// "label<TAB>value" when piped.
func printWhoami(ios *cmdutil.IOStreams, now time.Time, active clientconfig.Active, me *api.WhoamiResponse) error {
	projects := make([]string, len(me.Projects))
	for i, p := range me.Projects {
		projects[i] = p.Name
		if p.Role != "" && ios.IsStdoutTTY() {
			projects[i] += " (" + p.Role + ")"
		}
	}
	expires := cmdutil.FormatTime(ios, now, me.ExpiresAt)
	t := cmdutil.NewTablePrinter(ios)
	t.AddRow("email", me.User.Email)
	t.AddRow("user_id", me.User.ID)
	t.AddRow("role", me.User.Role)
	t.AddRow("context", active.Name)
	t.AddRow("server", active.Server)
	if active.Gateway != "" {
		t.AddRow("gateway", active.Gateway)
	}
	// The project commands act in: one set here wins over the default.
	project := active.Project
	if project == "" && me.DefaultProject != nil {
		project = me.DefaultProject.Name
	}
	t.AddRow("project", project)
	t.AddRow("projects", strings.Join(projects, ", "))
	t.AddRow("expires", expires)
	return t.Render()
}
