package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/fuzzytime"
)

// BudgetGetOptions are the inputs of `gpuaas billing budget get`.
type BudgetGetOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter
}

// NewCmdBudgetGet builds `gpuaas billing budget get`; runF replaces
// budgetGetRun in tests.
func NewCmdBudgetGet(f *cmdutil.Factory, runF func(context.Context, *BudgetGetOptions) error) *cobra.Command {
	opts := &BudgetGetOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Show the project's budgets: cap, spent this period, burn and runway",
		Long: `Show the project's budgets (and its members' own): the cap per period and
what was spent of it, the burn cap and the burn now, how long until the cap
at that burn, and what happens at the cap.` +
			cmdutil.PipedHelp("scope (\"project NAME\" or the user)", "period", "cap (minor units: cents)", "spent (minor units: cents)",
				"burn cap per hour (minor units: cents)", "burn per hour (minor units: cents)", "action at the cap"),
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return budgetGetRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Budget{}))
	return cmd
}

func budgetGetRun(ctx context.Context, opts *BudgetGetOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	l, err := client.BillingBudgetGet(ctx, api.BillingRequest{})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, l.Budgets)
	}
	if len(l.Budgets) == 0 && opts.IO.IsStdoutTTY() {
		_, err := fmt.Fprintf(opts.IO.ErrOut, "Project %s has no budget.\n", l.Project)
		return err
	}
	return printBudgets(opts.IO, l.Budgets)
}

// printBudgets prints budgets: a table with a header on a terminal,
// tab-separated rows (scope, period, cap, spent, burn cap, burn, action;
// money in minor units) when piped.
func printBudgets(ios *cmdutil.IOStreams, bs []api.Budget) error {
	t := cmdutil.NewTablePrinter(ios)
	tty := ios.IsStdoutTTY()
	if tty {
		t.AddHeader("SCOPE", "CAP", "SPENT", "BURN", "RUNWAY", "AT CAP")
	}
	for _, b := range bs {
		scope := "project " + b.Project
		if b.User != "" {
			scope = b.User
		} else if b.UserID != "" {
			scope = b.UserID
		}
		if !tty {
			t.AddRow(scope, b.Period, fmt.Sprint(b.AmountMinor), fmt.Sprint(b.SpentMinor),
				fmt.Sprint(b.BurnCapMinorPerHour), fmt.Sprint(b.BurnMinorPerHour), b.Action)
			continue
		}
		money := func(v int64) string { return api.FormatMoney(v, b.Currency) }
		capText, spent, runway := "-", "-", "-"
		if b.Period != "" {
			capText = money(b.AmountMinor) + "/" + b.Period
			spent = fmt.Sprintf("%s (%.0f%%)", money(b.SpentMinor), b.Percent)
			if b.PeriodEnd != nil {
				spent += ", resets " + b.PeriodEnd.UTC().Format("Jan 2 15:04 UTC")
			}
			if b.RunwaySeconds != nil {
				runway = fuzzytime.Duration(time.Duration(*b.RunwaySeconds) * time.Second)
			}
		}
		burn := money(b.BurnMinorPerHour) + "/h"
		if b.BurnCapMinorPerHour > 0 {
			burn += " of " + money(b.BurnCapMinorPerHour) + "/h"
		}
		t.AddRow(scope, capText, spent, burn, runway, b.Action)
	}
	return t.Render()
}
