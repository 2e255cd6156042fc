package project

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// MembersOptions are the inputs of `gpuaas project members`.
type MembersOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	// Project is the NAME argument; empty means -p/--project, else your
	// default project (controld decides).
	Project string
}

// NewCmdMembers builds `gpuaas project members`; runF replaces membersRun in tests.
func NewCmdMembers(f *cmdutil.Factory, runF func(context.Context, *MembersOptions) error) *cobra.Command {
	opts := &MembersOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "members [NAME]",
		Short: "List a project's members (default: -p/--project, else your default project)",
		Long: "List a project's members and their roles." + rolesHelp +
			cmdutil.PipedHelp("email", "role", "user id", "added (RFC 3339)"),
		Args: cmdutil.RangeArgs(0, 1, "at most one project"),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Project = args[0]
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return membersRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Member{}))
	return cmd
}

func membersRun(ctx context.Context, opts *MembersOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.ProjectMembers(ctx, opts.Project)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Members)
	}
	return printMembers(opts.IO, opts.Now(), resp.Members)
}
