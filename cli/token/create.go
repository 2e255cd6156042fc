package token

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

var tokenRoles = []string{api.ProjectMember, api.ProjectViewer}

// CreateOptions are the inputs of `gpuaas token create`.
type CreateOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Name string
	Role string
	TTL  string
}

// NewCmdCreate builds `gpuaas token create`; runF replaces createRun in tests.
func NewCmdCreate(f *cmdutil.Factory, runF func(context.Context, *CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "create NAME --role member|viewer --ttl 30d [-p PROJECT]",
		Short: "Create a token for a project you own; its secret is shown once",
		Long: `Create a token acting with a role in one project you own (-p/--project, else
your default project), for --ttl (days such as 30d, or a duration such as
12h; at most 365d). The secret goes to stdout once: store it in your CI's
secrets and use it as GPUAAS_TOKEN. Only its hash is kept.

A viewer token reads (alloc list, billing usage); a member token also
creates and releases allocations. No token can create tokens, mint SSH
certificates or change the project.`,
		Example: `  gpuaas token create ci --role member --ttl 30d -p ml
  GPUAAS_TOKEN=gpuaas_tk_… gpuaas alloc list`,
		Args: cmdutil.ExactArgs(1, "a token name"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Name = args[0]
			if !slices.Contains(tokenRoles, opts.Role) {
				return cmdutil.FlagErrorf("invalid --role %q: want member or viewer", opts.Role)
			}
			if _, err := api.ParseTokenTTL(opts.TTL); err != nil {
				return cmdutil.FlagErrorf("invalid --ttl: %s", errMessage(err))
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return createRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Role, "role", api.ProjectViewer, "Project role: member or viewer")
	cmd.Flags().StringVar(&opts.TTL, "ttl", "30d", "How long the token works: days (30d) or a duration (12h), at most 365d")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.TokenCreateResponse{}))
	return cmd
}

// errMessage is an API error's message, or the error's text.
func errMessage(err error) string {
	if e, ok := err.(*api.Error); ok {
		return e.Message
	}
	return err.Error()
}

func createRun(ctx context.Context, opts *CreateOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.TokenCreate(ctx, api.TokenCreateRequest{Name: opts.Name, Role: opts.Role, TTL: opts.TTL})
	if err != nil {
		return err
	}
	t := resp.Token
	fmt.Fprintf(opts.IO.ErrOut, "Created token %s (%s, %s in %s), expires %s.\n", t.Name, t.ID, t.Role, t.Project,
		t.ExpiresAt.UTC().Format(time.RFC3339))
	fmt.Fprintln(opts.IO.ErrOut, "Its secret is shown this once; use it as GPUAAS_TOKEN:")
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp)
	}
	_, err = fmt.Fprintln(opts.IO.Out, resp.Secret)
	return err
}
