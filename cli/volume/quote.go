package volume

import (
	"context"
	"fmt"
	"slices"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// createFields are the JSON fields of `volume create`: a volume's, and
// with --dry-run a quote's.
func createFields() []string {
	fields := cmdutil.FieldsOf(api.Volume{})
	for _, f := range cmdutil.FieldsOf(api.VolumeQuote{}) {
		if !slices.Contains(fields, f) {
			fields = append(fields, f)
		}
	}
	return fields
}

// quoteRun is `volume create --dry-run`: the server checks the create as
// it would make it, and prices it.
func quoteRun(ctx context.Context, client *api.Client, opts *CreateOptions) error {
	q, err := client.VolumeQuote(ctx, api.VolumeCreateRequest{Name: opts.Name, Size: opts.Size, Node: opts.Node})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, q)
	}
	return printQuote(opts.IO, q)
}

// printQuote prints a quote: a sentence on a terminal; piped, one row
// (name, node, size in bytes, price per GiB-month, per month, per hour,
// all in minor units, then the currency).
func printQuote(ios *cmdutil.IOStreams, q *api.VolumeQuote) error {
	if !ios.IsStdoutTTY() {
		t := cmdutil.NewTablePrinter(ios)
		t.AddRow(q.Name, q.Node, fmt.Sprint(q.SizeBytes), fmt.Sprint(q.PricePerGiBMonthMinor), fmt.Sprint(q.PricePerMonthMinor),
			fmt.Sprintf("%.4f", q.PricePerHourMinor), q.Currency)
		return t.Render()
	}
	fmt.Fprintf(ios.Out, "Volume %s of %s would be made on %s.\n", q.Name, api.FormatVolumeSize(q.SizeBytes), q.Node)
	fmt.Fprintf(ios.Out, "It would cost %s a month (730 hours), %s an hour, at %s per GiB-month, from when it is ready until it is removed.\n",
		api.FormatMoney(q.PricePerMonthMinor, q.Currency), formatSubMinor(q.PricePerHourMinor, q.Currency),
		api.FormatMoney(q.PricePerGiBMonthMinor, q.Currency))
	fmt.Fprintln(ios.ErrOut, "Nothing was made (--dry-run).")
	return nil
}

// formatSubMinor writes an amount of minor units that may be a fraction
// of one, in major units with the digits it needs ("$0.0137").
func formatSubMinor(minor float64, currency string) string {
	if currency == "usd" {
		return fmt.Sprintf("$%.4f", minor/100)
	}
	return fmt.Sprintf("%.4f %s", minor/100, currency)
}
