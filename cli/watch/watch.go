// Package watch holds `gpuaas watch`: the caller's events, live.
package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Options are the inputs of `gpuaas watch`.
type Options struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	Alloc string
	// Debug says on stderr when missed events were read back
	// (GPUAAS_DEBUG).
	Debug bool
}

// NewCmdWatch builds `gpuaas watch`; runF replaces watchRun in tests.
func NewCmdWatch(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Debug: f.Debug}
	cmd := &cobra.Command{
		Use:   "watch [--alloc ID] [--json]",
		Short: "Follow your events as they happen",
		Long: `Print the events of your projects as they happen: allocations changing
state (alloc.state), provisioning and release phases (alloc.progress),
notices about an allocation (alloc.notice: a GPU that failed, idle and
duration warnings, budget warnings), billing, budgets, projects, sessions
and nodes changing. It runs until interrupted (Ctrl-C, exit 130).

Without --json, each event is one line: time, allocation (or other
subject), kind, and what happened, e.g. "quarantine: gpuaas: GPU
0000:18:00.0 ... failed" for a notice. With --json, each event is one JSON
object on its own line (NDJSON), written as it arrives; --jq and --template
apply to each event.

--alloc keeps only the events of one allocation.

No event is lost to a dropped connection: once it is back, the watch asks
the server for the events it missed and prints them first, each once, in
order (each event carries its stream sequence, "seq"). Nor is one lost
silently while the connection stays up (a NATS server cut off from the
others): each event names your previous one ("prev"), and a quiet watch
asks the server for your latest every second or so, so a missed event is
read back within about a second of the server being reachable
(GPUAAS_DEBUG=1 says when). If the server no longer holds some of them
(the event stream keeps a week), a warning says so on stderr and, with
--json, an "events.gap" line stands in their place. When your session ends
(gpuaas logout elsewhere, expiry), the watch says so and exits 4.`,
		Example: `  gpuaas watch
  gpuaas watch --alloc a-4f2k9x
  gpuaas watch --json | jq -c 'select(.kind == "alloc.state") | .data.to'
  gpuaas watch --jq 'select(.kind == "alloc.state") | "\(.subject) \(.data.to)"'`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return watchRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Alloc, "alloc", "", "Only the events of this allocation")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Event{}))
	return cmd
}

func watchRun(ctx context.Context, opts *Options) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	who, err := client.Whoami(ctx)
	if err != nil {
		return err
	}
	if opts.Alloc != "" {
		// Fail now on an allocation that does not exist (or is not
		// yours) rather than wait forever for its events.
		if _, err := client.AllocGet(ctx, opts.Alloc); err != nil {
			return err
		}
	}
	// The connection's asynchronous errors are the watch's to explain:
	// the server refusing the session once it ended (logout) is said
	// once, with what to do, when the stream ends (SubscriptionEnded),
	// not printed raw by the client library as it happens.
	client.Conn().SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if !errors.Is(client.SubscriptionEnded(), api.ErrSessionEnded) {
			fmt.Fprintf(opts.IO.ErrOut, "warning: %v\n", err)
		}
	})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var subOpts []api.SubscribeOption
	if opts.Debug {
		subOpts = append(subOpts, api.OnRefill(func(r api.EventsRefill) {
			fmt.Fprintf(opts.IO.ErrOut, "debug: read back %d events after #%d that did not arrive live (%s)\n", r.Events, r.After, r.Cause)
		}))
	}
	events, err := client.SubscribeEvents(ctx, who.User.ID, subOpts...)
	if err != nil {
		return err
	}
	if opts.IO.IsStderrTTY() {
		fmt.Fprintf(opts.IO.ErrOut, "Watching events of %s; Ctrl-C to stop\n", who.User.Email)
	}
	// One JSON value per line, even on a terminal (no indenting).
	stream := *opts.IO
	stream.SetStdoutTTY(false)
	for ev := range events {
		if ev.Kind == api.EventsGap {
			// Events lost for good: say so on stderr, and in the JSON
			// stream for scripts (the gap is its own events.gap line).
			var gap api.EventsGapData
			_ = json.Unmarshal(ev.Data, &gap)
			fmt.Fprintf(opts.IO.ErrOut, "warning: %s\n", gap)
			if opts.Exporter == nil {
				continue
			}
		} else if opts.Alloc != "" && ev.Subject != opts.Alloc {
			continue
		}
		if opts.Exporter != nil {
			err = opts.Exporter.Write(ctx, &stream, ev)
		} else {
			err = printEvent(opts.IO, ev)
		}
		if err != nil {
			return fmt.Errorf("write event: %w", err)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	err = client.SubscriptionEnded()
	if errors.Is(err, api.ErrSessionEnded) {
		return err
	}
	return &api.Error{Code: api.CodeUnavailable, Message: "the event stream ended: the connection to the server closed",
		Hint: "run `gpuaas watch` again once the server is back"}
}

// printEvent writes the human line of an event: aligned on a terminal,
// tab-separated with an RFC 3339 time when piped.
func printEvent(ios *cmdutil.IOStreams, ev api.Event) error {
	detail, subject, kind := describe(ev), api.SanitizeText(ev.Subject), api.SanitizeText(ev.Kind)
	if !ios.IsStdoutTTY() {
		_, err := fmt.Fprintf(ios.Out, "%s\t%s\t%s\t%s\n", ev.At.UTC().Format(time.RFC3339), subject, kind, detail)
		return err
	}
	_, err := fmt.Fprintf(ios.Out, "%s  %-14s  %-15s %s\n", ev.At.Local().Format("15:04:05"), subject, kind, detail)
	return err
}
