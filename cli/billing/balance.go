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

// BalanceOptions are the inputs of `gpuaas billing balance`.
type BalanceOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter
}

// NewCmdBalance builds `gpuaas billing balance`; runF replaces balanceRun in tests.
func NewCmdBalance(f *cmdutil.Factory, runF func(context.Context, *BalanceOptions) error) *cobra.Command {
	opts := &BalanceOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "balance",
		Short: "Show the project's balance and what its allocations cost per hour",
		Long: `Show the project's balance, what its running allocations cost per hour,
how long the balance lasts at that burn, and the low-balance threshold.` +
			cmdutil.PipedHelp("project", "balance (minor units: cents)", "currency", "burn per hour (minor units: cents)"),
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return balanceRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.BillingBalance{}))
	return cmd
}

func balanceRun(ctx context.Context, opts *BalanceOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	b, err := client.BillingBalance(ctx, api.BillingRequest{})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, b)
	}
	return printBalance(opts.IO, opts.Now(), b)
}

// printBalance prints a balance: a summary on a terminal, one
// tab-separated row (project, balance, currency, burn rate) when piped.
func printBalance(ios *cmdutil.IOStreams, now time.Time, b *api.BillingBalance) error {
	if !ios.IsStdoutTTY() {
		t := cmdutil.NewTablePrinter(ios)
		t.AddRow(b.Project, fmt.Sprint(b.BalanceMinor), b.Currency, fmt.Sprint(b.BurnRateMinorPerHour))
		return t.Render()
	}
	cs := ios.ColorScheme()
	color := cs.Green
	switch {
	case b.BalanceMinor <= 0:
		color = cs.Red
	case b.LowBalance:
		color = cs.Yellow
	}
	fmt.Fprintf(ios.Out, "%s  %s\n", cs.Bold(b.Project), color(api.FormatMoney(b.BalanceMinor, b.Currency)))
	t := cmdutil.NewTablePrinter(ios)
	running := fmt.Sprintf("%d allocations", b.RunningAllocations)
	if b.RunningVolumes > 0 { // their storage is in the burn (docs/volumes.md)
		running += fmt.Sprintf(" and %d volumes (storage %s/hour)", b.RunningVolumes, api.FormatMoney(b.StorageBurnMinorPerHour, b.Currency))
	}
	t.AddRow("  running", fmt.Sprintf("%s, %s/hour", running, api.FormatMoney(b.BurnRateMinorPerHour, b.Currency)))
	if b.BurnRateMinorPerHour > 0 && b.BalanceMinor > 0 {
		left := time.Duration(float64(b.BalanceMinor) / float64(b.BurnRateMinorPerHour) * float64(time.Hour))
		t.AddRow("  lasts", "about "+fuzzytime.Duration(left))
	}
	t.AddRow("  warn below", api.FormatMoney(b.LowBalanceThresholdMinor, b.Currency))
	if b.GraceEndsAt != nil {
		t.AddRow("  depleted", fmt.Sprintf("allocations are released %s unless it is topped up",
			cmdutil.FormatTime(ios, now, *b.GraceEndsAt)))
	}
	return t.Render()
}
