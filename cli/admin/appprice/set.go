package appprice

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// SetOptions are the inputs of `gpuaas admin app-price set`.
type SetOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	App        string
	Currency   string
	PriceMinor int64
}

// NewCmdSet builds `gpuaas admin app-price set`; runF replaces setRun in tests.
func NewCmdSet(f *cmdutil.Factory, runF func(context.Context, *SetOptions) error) *cobra.Command {
	opts := &SetOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "set NAME PRICE [--currency usd]",
		Short: "Set a platform app's own price per hour (operators)",
		Long: `Set what the platform app NAME (a name or id) costs an hour on top of its
allocation's price, in major units with at most two decimals (1.50 is a
dollar fifty; 0 makes it cost nothing of its own). Workloads run from now
on are charged it for their running time; a running workload keeps the
price it was run with. Setting the price it already has changes nothing.
Audited (admin.app_price_set) with the price before, and told as an
app.price event. A project's own app, a negative price or one in another
currency than the platform's (usd) is refused. Piped, the columns are:
app id, name, price, previous price (minor units: cents), changed.`,
		Example: `  gpuaas admin app-price set jupyter 0.50
  gpuaas admin app-price set jupyter 0`,
		Args: cmdutil.ExactArgs(2, "an app's name and a price per hour, like jupyter 0.50"),
		RunE: func(c *cobra.Command, args []string) error {
			v, err := api.ParseMinor(args[1])
			if err != nil {
				return cmdutil.FlagErrorf("price: %v", err)
			}
			if v < 0 {
				return cmdutil.FlagErrorf("price: %s is negative", args[1])
			}
			opts.App, opts.PriceMinor = args[0], v
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return setRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Currency, "currency", "usd", "Currency of the price")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.AppPrice{}))
	return cmd
}

func setRun(ctx context.Context, opts *SetOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	p, err := client.AdminAppPriceSet(ctx, api.AppPriceSetRequest{App: opts.App, Currency: opts.Currency, PricePerHourMinor: opts.PriceMinor})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, p)
	}
	if !opts.IO.IsStdoutTTY() {
		_, err := fmt.Fprintf(opts.IO.Out, "%s\t%s\t%d\t%d\t%t\n", p.AppID, p.App, p.PricePerHourMinor, p.PreviousMinor, p.Changed)
		return err
	}
	if !p.Changed {
		_, err := fmt.Fprintf(opts.IO.Out, "App %s already costs %s an hour of its own; nothing changed\n", p.App, api.FormatMoney(p.PricePerHourMinor, p.Currency))
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "App %s now costs %s an hour on top of its allocation (was %s); running workloads keep their price\n",
		p.App, api.FormatMoney(p.PricePerHourMinor, p.Currency), api.FormatMoney(p.PreviousMinor, p.Currency))
	return err
}
