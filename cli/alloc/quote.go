package alloc

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// createFields are the --json fields of `alloc create`: the allocation's,
// and with --dry-run the quote's (fields the output lacks come out null).
func createFields() []string {
	fields := cmdutil.FieldsOf(api.Allocation{})
	for _, f := range cmdutil.FieldsOf(api.AllocQuote{}) {
		if !slices.Contains(fields, f) {
			fields = append(fields, f)
		}
	}
	return fields
}

// quoteRun is `alloc create --dry-run`.
func quoteRun(ctx context.Context, opts *CreateOptions, client *api.Client, req api.AllocCreateRequest) error {
	q, err := client.AllocQuote(ctx, req)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, q)
	}
	return printQuote(opts.IO, q)
}

// printQuote shows a quote: a summary on a terminal, one tab-separated row
// when piped (sku, gpus, price per hour in minor units, currency, fits,
// queue position, balance and runway in seconds, the two empty when
// unknown, the project's total burn per hour with this allocation, and
// whether the balance is enough to create it).
func printQuote(ios *cmdutil.IOStreams, q *api.AllocQuote) error {
	if !ios.IsStdoutTTY() {
		t := cmdutil.NewTablePrinter(ios)
		t.AddRow(q.SKU, strconv.Itoa(q.GPUs), strconv.FormatInt(q.PricePerHourMinor, 10), q.Currency,
			strconv.FormatBool(q.Fits), strconv.Itoa(q.QueuePosition), optInt(q.BalanceMinor), optInt(q.RunwaySeconds),
			strconv.FormatInt(q.BurnPerHourMinor, 10), strconv.FormatBool(!q.InsufficientFunds))
		return t.Render()
	}
	cs := ios.ColorScheme()
	fmt.Fprintln(ios.ErrOut, "Dry run: nothing was created.")
	t := cmdutil.NewTablePrinter(ios)
	t.AddRow("  sku", fmt.Sprintf("%s (%s, %s)", q.SKU, q.Shape, plural(q.GPUs, "GPU")))
	t.AddRow("  price", api.FormatMoney(q.PricePerHourMinor, q.Currency)+" per hour")
	switch {
	case q.Fits:
		t.AddRow("  fits", cs.Green("yes, now")+" (on "+q.NodeID+")")
	case q.Queued:
		t.AddRow("  fits", cs.Yellow(fmt.Sprintf("not now: it would be #%d in line for %s", q.QueuePosition, q.SKU)))
	default:
		t.AddRow("  fits", cs.Red("no capacity now")+" (add --queue to wait in line)")
	}
	if q.BalanceMinor != nil {
		t.AddRow("  balance", api.FormatMoney(*q.BalanceMinor, q.Currency))
	}
	if q.RunwaySeconds != nil {
		t.AddRow("  runway", api.FormatRunway(*q.RunwaySeconds)+" at "+burnText(q))
	}
	if q.InsufficientFunds {
		how := "top up with `gpuaas billing topup`"
		if q.TopupsOff {
			how = "top-ups are off here: an administrator can add credit (`gpuaas admin credit`)"
		}
		t.AddRow("  funds", cs.Red("too low to create")+fmt.Sprintf(": %s is needed for %s at %s/h; %s",
			api.FormatMoney(q.NeededMinor, q.Currency), minutes(q.MinRunwaySeconds), api.FormatMoney(q.BurnPerHourMinor, q.Currency), how))
	}
	if q.BudgetExceeded != "" {
		t.AddRow("  budget", cs.Red("over")+": "+q.BudgetExceeded)
	}
	return t.Render()
}

// burnText is the project's total burn a runway is computed at, and what
// it is made of.
func burnText(q *api.AllocQuote) string {
	burn := api.FormatMoney(q.BurnPerHourMinor, q.Currency) + "/h"
	if running := q.BurnPerHourMinor - q.PricePerHourMinor; running > 0 {
		return burn + " (" + api.FormatMoney(running, q.Currency) + "/h already running + this one)"
	}
	return burn + " (this one; nothing else running)"
}

// minutes says a duration given in seconds in whole minutes when it is
// whole minutes.
func minutes(seconds int64) string {
	if seconds%60 == 0 && seconds > 0 {
		return plural(int(seconds/60), "minute")
	}
	return (time.Duration(seconds) * time.Second).String()
}

func optInt(v *int64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatInt(*v, 10)
}
