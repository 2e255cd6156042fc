package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// LedgerOptions are the inputs of `gpuaas billing ledger`.
type LedgerOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter

	Limit  int
	Before int64
}

// NewCmdLedger builds `gpuaas billing ledger`; runF replaces ledgerRun in tests.
func NewCmdLedger(f *cmdutil.Factory, runF func(context.Context, *LedgerOptions) error) *cobra.Command {
	opts := &LedgerOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "ledger [--limit N] [--before ID]",
		Short: "List the project's ledger entries, newest first",
		Long: `List the project's ledger entries, newest first: top-ups, usage windows,
refunds and adjustments. Amounts are in minor units with --json (cents);
credits are positive, debits negative. The ledger is append-only and each
entry carries the hash chaining it to the previous one.` +
			cmdutil.PipedHelp("id", "when (RFC 3339)", "kind", "amount (minor units: cents)", "reference", "memo"),
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Limit < 1 || opts.Limit > 1000 {
				return cmdutil.FlagErrorf("invalid --limit %d: want 1 to 1000", opts.Limit)
			}
			if opts.Before < 0 {
				return cmdutil.FlagErrorf("invalid --before %d", opts.Before)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return ledgerRun(c.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&opts.Limit, "limit", 50, "At most this many entries")
	cmd.Flags().Int64Var(&opts.Before, "before", 0, "Only entries older than this entry id (paging)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.LedgerEntry{}))
	return cmd
}

func ledgerRun(ctx context.Context, opts *LedgerOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.BillingLedger(ctx, api.BillingLedgerRequest{Limit: opts.Limit, Before: opts.Before})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, resp.Entries)
	}
	return printLedger(opts.IO, opts.Now(), resp.Entries)
}

func printLedger(ios *cmdutil.IOStreams, now time.Time, es []api.LedgerEntry) error {
	if len(es) == 0 && ios.IsStdoutTTY() {
		fmt.Fprintln(ios.ErrOut, "No ledger entries")
		return nil
	}
	cs := ios.ColorScheme()
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("id", "when", "kind", "amount", "reference", "memo")
	for _, e := range es {
		t.AddField(fmt.Sprint(e.ID))
		t.AddField(cmdutil.FormatTime(ios, now, e.CreatedAt))
		t.AddField(e.Kind)
		amount, color := fmt.Sprint(e.AmountMinor), cs.Green
		if ios.IsStdoutTTY() {
			amount = api.FormatMoney(e.AmountMinor, e.Currency)
		}
		if e.AmountMinor < 0 {
			color = cs.Red
		}
		t.AddField(amount, cmdutil.WithColor(color))
		t.AddField(e.Reference)
		t.AddField(e.Memo)
		t.EndRow()
	}
	return t.Render()
}
