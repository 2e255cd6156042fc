package appprice

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ListOptions are the inputs of `gpuaas admin app-price list`.
type ListOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter
}

// NewCmdList builds `gpuaas admin app-price list`; runF replaces listRun in tests.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the platform apps with their own price per hour (operators)",
		Long: `List every platform app, whatever its lifecycle, with its own price per hour
(0: it costs only its allocation). Piped, the columns are: app id, name,
lifecycle, price per hour (minor units: cents), when it was last set
(RFC 3339, empty if never).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return listRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.AppPrice{}))
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	l, err := client.AdminAppPriceList(ctx)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, l.Prices)
	}
	return writeList(opts.IO, l.Prices)
}

// writeList prints the prices: a table on a terminal, rows when piped.
func writeList(ios *cmdutil.IOStreams, ps []api.AppPrice) error {
	tty := ios.IsStdoutTTY()
	if len(ps) == 0 {
		if tty {
			fmt.Fprintln(ios.ErrOut, "No platform apps")
		}
		return nil
	}
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("id", "app", "lifecycle", "price/h", "set")
	for _, p := range ps {
		price, set := fmt.Sprint(p.PricePerHourMinor), ""
		if tty {
			price = api.FormatMoney(p.PricePerHourMinor, p.Currency)
		}
		if p.UpdatedAt != nil {
			set = p.UpdatedAt.UTC().Format(time.RFC3339)
		}
		t.AddRow(p.AppID, p.App, p.Lifecycle, price, set)
	}
	return t.Render()
}
