package volumeprice

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// SetOptions are the inputs of `gpuaas admin volume-price set`.
type SetOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter

	Currency   string
	PriceMinor int64
}

// NewCmdSet builds `gpuaas admin volume-price set`; runF replaces setRun in tests.
func NewCmdSet(f *cmdutil.Factory, runF func(context.Context, *SetOptions) error) *cobra.Command {
	opts := &SetOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "set PRICE [--currency usd]",
		Short: "Set the price of a GiB of volume for a month (admins)",
		Long: `Set what a GiB of volume costs for a month of 730 hours, in major units
with at most two decimals (0.12 is 12 cents). Volumes made or grown from
now on are charged at it; a volume being charged keeps its price until it
is resized. Setting the price it already has changes nothing. Audited
(admin.volume_price_set) with the price before, and told as a
volume.price event. Volumes are charged in the platform's one currency
(usd): a price in another is refused.`,
		Example: `  gpuaas admin volume-price set 0.12
  gpuaas admin volume-price set 0.08 --currency usd`,
		Args: cmdutil.ExactArgs(1, "a price per GiB-month, like 0.12"),
		RunE: func(c *cobra.Command, args []string) error {
			v, err := api.ParseMinor(args[0])
			if err != nil {
				return cmdutil.FlagErrorf("price: %v", err)
			}
			if v < 0 {
				return cmdutil.FlagErrorf("price: %s is negative", args[0])
			}
			opts.PriceMinor = v
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return setRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Currency, "currency", "usd", "Currency of the price")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.VolumePrice{}))
	return cmd
}

func setRun(ctx context.Context, opts *SetOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	p, err := client.AdminVolumePriceSet(ctx, api.VolumePriceSetRequest{Currency: opts.Currency, PricePerGiBMonthMinor: opts.PriceMinor})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, p)
	}
	if !opts.IO.IsStdoutTTY() {
		_, err := fmt.Fprintf(opts.IO.Out, "%s\t%d\t%d\t%t\n", p.Currency, p.PricePerGiBMonthMinor, p.PreviousMinor, p.Changed)
		return err
	}
	if !p.Changed {
		_, err := fmt.Fprintf(opts.IO.Out, "A GiB of volume already costs %s a month; nothing changed\n", api.FormatMoney(p.PricePerGiBMonthMinor, p.Currency))
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "A GiB of volume now costs %s a month (was %s); volumes being charged keep their price until resized\n",
		api.FormatMoney(p.PricePerGiBMonthMinor, p.Currency), api.FormatMoney(p.PreviousMinor, p.Currency))
	return err
}
