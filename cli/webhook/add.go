package webhook

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// AddOptions are the inputs of `gpuaas webhook add`.
type AddOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	URL    string
	Events []string
}

// NewCmdAdd builds `gpuaas webhook add`; runF replaces addRun in tests.
func NewCmdAdd(f *cmdutil.Factory, runF func(context.Context, *AddOptions) error) *cobra.Command {
	opts := &AddOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "add URL --events KIND[,KIND...]",
		Short: "Send the project's events of some kinds to an https URL",
		Long: `Subscribe an https URL to event kinds of the project (-p/--project); you must
own the project. The reply shows the webhook's signing secret once: keep it
where the receiver checks signatures. Kinds: ` + strings.Join(api.WebhookEvents, ", ") + `.
URLs on loopback, private or link-local addresses are refused unless the
operator allows them.`,
		Example: `  gpuaas webhook add https://hooks.example.com/gpuaas --events alloc.state,alloc.notice
  gpuaas webhook add https://hooks.example.com/budget --events billing.budget --json id,secret`,
		Args: cmdutil.ExactArgs(1, "the receiver's https URL"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.URL = args[0]
			if len(opts.Events) == 0 {
				return cmdutil.FlagErrorf("name the event kinds to send with --events, e.g. --events alloc.state")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return addRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringSliceVar(&opts.Events, "events", nil, "Event kinds to send (comma-separated or repeated)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Webhook{}))
	return cmd
}

func addRun(ctx context.Context, opts *AddOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	w, err := client.WebhookAdd(ctx, api.WebhookAddRequest{URL: opts.URL, Events: opts.Events})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, w)
	}
	fmt.Fprintf(opts.IO.ErrOut, "Added webhook %s to %s for %s\n", w.ID, w.URL, strings.Join(w.Events, ", "))
	fmt.Fprintln(opts.IO.ErrOut, "Signing secret (shown once; check deliveries' Gpuaas-Signature with it):")
	_, err = fmt.Fprintln(opts.IO.Out, w.Secret)
	return err
}
