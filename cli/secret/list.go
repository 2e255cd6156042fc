package secret

import (
	"context"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ListOptions are the inputs of `gpuaas secret list`.
type ListOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter
}

// NewCmdList builds `gpuaas secret list`; runF replaces listRun in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the project's secrets (names, never values)",
		Long: "List the project's secrets: names, who set them and when, size and digest; never a value." +
			cmdutil.PipedHelp("name", "size (bytes)", "digest", "set by (user id)", "set at (RFC 3339)"),
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return listRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Secret{}))
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	l, err := client.SecretList(ctx, api.SecretListRequest{})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, l.Secrets)
	}
	if len(l.Secrets) == 0 && opts.IO.IsStdoutTTY() {
		_, err := opts.IO.ErrOut.Write([]byte("No secrets\n"))
		return err
	}
	t := cmdutil.NewTablePrinter(opts.IO)
	t.AddHeader("name", "size", "digest", "set by", "set")
	for _, s := range l.Secrets {
		t.AddRow(s.Name, strconv.Itoa(s.Size), s.Digest, s.SetBy, cmdutil.FormatTime(opts.IO, opts.Now(), s.SetAt))
	}
	return t.Render()
}
