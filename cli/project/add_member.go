package project

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

var projectRoles = []string{api.ProjectMember, api.ProjectViewer, api.ProjectOwner}

// AddMemberOptions are the inputs of `gpuaas project add-member`.
type AddMemberOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Project string
	Email   string
	Role    string
}

// NewCmdAddMember builds `gpuaas project add-member`; runF replaces
// addMemberRun in tests.
func NewCmdAddMember(f *cmdutil.Factory, runF func(context.Context, *AddMemberOptions) error) *cobra.Command {
	opts := &AddMemberOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "add-member NAME --email EMAIL [--role member|viewer|owner]",
		Short: "Add someone to a project, or change their role",
		Long: `Add a person to a project by email, or change their role if they are a
member already (owners only). Prints the project's members afterwards.` + rolesHelp,
		Example: `  gpuaas project add-member ml --email grace@example.com
  gpuaas project add-member ml --email grace@example.com --role viewer`,
		Args: cmdutil.ExactArgs(1, "a project name"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Project = args[0]
			if opts.Email == "" {
				return cmdutil.FlagErrorf("--email is required")
			}
			if !slices.Contains(projectRoles, opts.Role) {
				return cmdutil.FlagErrorf("invalid --role %q: want one of %v", opts.Role, projectRoles)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return addMemberRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Email, "email", "", "Email of the person to add (required)")
	cmd.Flags().StringVar(&opts.Role, "role", api.ProjectMember, "Project role: member, viewer or owner")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Member{}))
	return cmd
}

func addMemberRun(ctx context.Context, opts *AddMemberOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.ProjectAddMember(ctx, api.AddMemberRequest{Project: opts.Project, Email: opts.Email, Role: opts.Role})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "%s is now %s of %s\n", opts.Email, opts.Role, resp.Project.Name)
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Members)
	}
	return printMembers(opts.IO, opts.Now(), resp.Members)
}
