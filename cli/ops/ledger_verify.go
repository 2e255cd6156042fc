package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// LedgerVerifyOptions are the inputs of `gpuaas ops ledger verify`.
type LedgerVerifyOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter
}

// ErrLedgerBroken is returned (exit status 1) when an account fails the check.
var ErrLedgerBroken = errors.New("the ledger check failed: see the problems above")

// NewCmdLedger builds `gpuaas ops ledger`.
func NewCmdLedger(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ledger <command>",
		Short: "Check the billing ledger (admins)",
	}
	cmd.AddCommand(NewCmdLedgerVerify(f, nil))
	return cmd
}

// NewCmdLedgerVerify builds `gpuaas ops ledger verify`; runF replaces ledgerVerifyRun in tests.
func NewCmdLedgerVerify(f *cmdutil.Factory, runF func(context.Context, *LedgerVerifyOptions) error) *cobra.Command {
	opts := &LedgerVerifyOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Recompute every account's hash chain and balance",
		Long: `Recompute every project account's hash chain, entry by entry, and its
balance, and compare them with the cached account. It lists each account
with its balance and exits 1 if any account's chain is broken or its cache
disagrees.`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return ledgerVerifyRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.LedgerAccountCheck{}))
	return cmd
}

func ledgerVerifyRun(ctx context.Context, opts *LedgerVerifyOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.LedgerVerify(ctx)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		err = opts.Exporter.Write(ctx, opts.IO, resp.Accounts)
	} else {
		err = printLedgerChecks(opts.IO, resp)
	}
	if err == nil && !resp.OK {
		err = ErrLedgerBroken
	}
	return err
}

func printLedgerChecks(ios *cmdutil.IOStreams, resp *api.LedgerVerifyResponse) error {
	cs := ios.ColorScheme()
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("project", "entries", "balance", "cached", "status")
	for _, a := range resp.Accounts {
		t.AddField(a.ProjectID)
		t.AddField(fmt.Sprint(a.Entries))
		t.AddField(fmt.Sprint(a.BalanceMinor))
		t.AddField(fmt.Sprint(a.CachedBalanceMinor))
		if a.OK {
			t.AddField("ok", cmdutil.WithColor(cs.Green))
		} else {
			t.AddField("BROKEN", cmdutil.WithColor(cs.Red))
		}
		t.EndRow()
	}
	if err := t.Render(); err != nil {
		return err
	}
	for _, a := range resp.Accounts {
		for _, p := range a.Problems {
			fmt.Fprintf(ios.ErrOut, "%s: %s\n", a.ProjectID, p)
		}
	}
	if ios.IsStderrTTY() {
		if resp.OK {
			fmt.Fprintf(ios.ErrOut, "%d accounts, every chain intact\n", len(resp.Accounts))
		} else {
			fmt.Fprintln(ios.ErrOut, "the ledger check FAILED")
		}
	}
	return nil
}
