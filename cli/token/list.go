package token

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ListOptions are the inputs of `gpuaas token list`.
type ListOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	All bool
}

// NewCmdList builds `gpuaas token list`; runF replaces listRun in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:     "list [--all] [-p PROJECT]",
		Aliases: []string{"ls"},
		Short:   "List a project's tokens (owners), never their secrets",
		Long: "List the tokens of a project you own (-p/--project, else your default project); " +
			"--all includes revoked and expired ones." +
			cmdutil.PipedHelp("name", "id", "role", "state", "expires (RFC 3339)", "created by"),
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return listRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "Include revoked and expired tokens")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Token{}))
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.TokenList(ctx, api.TokenListRequest{All: opts.All})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Tokens)
	}
	return printTokens(opts.IO, opts.Now(), resp.Tokens)
}

// printTokens prints tokens as a table.
func printTokens(ios *cmdutil.IOStreams, now time.Time, tokens []api.Token) error {
	if len(tokens) == 0 && ios.IsStdoutTTY() {
		_, err := ios.ErrOut.Write([]byte("No tokens\n"))
		return err
	}
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("name", "id", "role", "state", "expires", "created by")
	for _, k := range tokens {
		t.AddRow(k.Name, k.ID, k.Role, k.State, cmdutil.FormatTime(ios, now, k.ExpiresAt), k.CreatedByEmail)
	}
	return t.Render()
}
