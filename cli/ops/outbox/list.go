package outbox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// states are what --state accepts.
var states = []string{api.OutboxDead, api.OutboxPending, api.OutboxPublished, api.OutboxDropped}

// ListOptions are the inputs of `gpuaas ops outbox list`.
type ListOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	State string
	Limit int
}

// NewCmdList builds `gpuaas ops outbox list`; runF replaces listRun in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:     "list [--state dead|pending|published|dropped] [--limit N]",
		Aliases: []string{"ls"},
		Short:   "List dead outbox events (or those in another state), oldest first",
		Example: `  gpuaas ops outbox list
  gpuaas ops outbox list --json id,kind,last_error`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !slices.Contains(states, opts.State) {
				return cmdutil.FlagErrorf("--state must be one of %s, got %q", strings.Join(states, ", "), opts.State)
			}
			if opts.Limit < 1 || opts.Limit > 1000 {
				return cmdutil.FlagErrorf("--limit must be between 1 and 1000, got %d", opts.Limit)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return listRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.State, "state", api.OutboxDead, "Events in this state: dead, pending, published or dropped")
	cmd.Flags().IntVarP(&opts.Limit, "limit", "L", 100, "At most this many events")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.OutboxEvent{}))
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.OutboxList(ctx, api.OutboxListRequest{State: opts.State, Limit: opts.Limit})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Events)
	}
	if len(resp.Events) == 0 && opts.IO.IsStdoutTTY() {
		fmt.Fprintf(opts.IO.ErrOut, "No %s outbox events\n", opts.State)
		return nil
	}
	return printEvents(opts.IO, opts.Now(), resp.Events)
}

// printEvents prints events as a table.
func printEvents(ios *cmdutil.IOStreams, now time.Time, events []api.OutboxEvent) error {
	cs := ios.ColorScheme()
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("id", "kind", "subject", "state", "attempts", "created", "last error")
	for _, e := range events {
		t.AddField(fmt.Sprint(e.ID))
		t.AddField(e.Kind)
		t.AddField(e.Subject)
		switch e.State {
		case api.OutboxDead:
			t.AddField(e.State, cmdutil.WithColor(cs.Red))
		case api.OutboxPublished:
			t.AddField(e.State, cmdutil.WithColor(cs.Green))
		default:
			t.AddField(e.State, cmdutil.WithColor(cs.Gray))
		}
		t.AddField(fmt.Sprint(e.Attempts))
		t.AddField(cmdutil.FormatTime(ios, now, e.CreatedAt))
		t.AddField(e.LastError)
		t.EndRow()
	}
	return t.Render()
}
