package webhook

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ListOptions are the inputs of `gpuaas webhook list`.
type ListOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter
}

// NewCmdList builds `gpuaas webhook list`; runF replaces listRun in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the project's webhooks",
		Long: "List the project's webhooks (never their secrets)." +
			cmdutil.PipedHelp("id", "url", "events (comma-separated)", "created (RFC 3339)"),
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return listRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Webhook{}))
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	l, err := client.WebhookList(ctx, api.WebhookListRequest{})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, l.Webhooks)
	}
	if len(l.Webhooks) == 0 && opts.IO.IsStdoutTTY() {
		_, err := opts.IO.ErrOut.Write([]byte("No webhooks\n"))
		return err
	}
	t := cmdutil.NewTablePrinter(opts.IO)
	t.AddHeader("id", "url", "events", "created")
	for _, w := range l.Webhooks {
		t.AddRow(w.ID, w.URL, strings.Join(w.Events, ","), cmdutil.FormatTime(opts.IO, opts.Now(), w.CreatedAt))
	}
	return t.Render()
}
