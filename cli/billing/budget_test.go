package billing

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestBudgetSetFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    api.BudgetSetRequest
		wantErr string
	}{
		{name: "spend cap", args: []string{"--period", "day", "--amount", "1.00"},
			want: api.BudgetSetRequest{Period: "day", AmountMinor: 100, Action: api.BudgetRefuse}},
		{name: "both, released at the cap", args: []string{"--user", "ana@example.test", "--period", "month", "--amount", "500",
			"--burn-cap", "0.50", "--release-at-cap"},
			want: api.BudgetSetRequest{User: "ana@example.test", Period: "month", AmountMinor: 500_00, BurnCapMinorPerHour: 50,
				Action: api.BudgetRelease}},
		{name: "nothing", args: nil, wantErr: "give a spend cap"},
		{name: "period alone", args: []string{"--period", "day"}, wantErr: "go together"},
		{name: "unknown period", args: []string{"--period", "year", "--amount", "1"}, wantErr: "day, week or month"},
		{name: "zero amount", args: []string{"--period", "day", "--amount", "0"}, wantErr: "more than zero"},
		{name: "three decimals", args: []string{"--burn-cap", "0.505"}, wantErr: "--burn-cap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			var got *BudgetSetOptions
			cmd := NewCmdBudgetSet(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *BudgetSetOptions) error {
				got = o
				return nil
			})
			cmd.SetArgs(tc.args)
			cmd.SetOut(&strings.Builder{})
			cmd.SetErr(&strings.Builder{})
			_, err := cmd.ExecuteC()
			if tc.wantErr != "" {
				if !errors.As(err, new(*cmdutil.FlagError)) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v; want a usage error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Request != tc.want {
				t.Errorf("got %+v; want %+v", got.Request, tc.want)
			}
		})
	}
}

// TestBudgetCommandsAgainstControld: set, get and clear against a real
// controld; a create over the budget exits with the budget code (14).
func TestBudgetCommandsAgainstControld(t *testing.T) {
	e := newEnv(t) // 116 cents spent today
	set := func(f *cmdutil.Factory) *cobra.Command { return NewCmdBudgetSet(f, nil) }
	get := func(f *cmdutil.Factory) *cobra.Command { return NewCmdBudgetGet(f, nil) }
	clear := func(f *cmdutil.Factory) *cobra.Command { return NewCmdBudgetClear(f, nil) }
	out, _, err := e.run(t, true, set, "--period", "day", "--amount", "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SCOPE", "project testproj", "$2.00/day", "$1.16 (58%), resets Aug 2 00:00 UTC", "refuse"} {
		if !strings.Contains(out, want) {
			t.Errorf("set output\n%s\nwant it to contain %q", out, want)
		}
	}
	if out, _, err = e.run(t, false, get); err != nil || out != "project testproj\tday\t200\t116\t0\t0\trefuse\n" {
		t.Errorf("get piped: %q, %v", out, err)
	}
	if out, _, err = e.run(t, false, get, "--json", "spent_minor,percent"); err != nil || out != `[{"percent":58,"spent_minor":116}]`+"\n" {
		t.Errorf("get json: %q, %v", out, err)
	}
	_, err = e.Client(e.AdminToken).AllocCreate(t.Context(), api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if code := cmdutil.ExitCodeOf(err); code != 14 {
		t.Errorf("create over the budget: %v, exit %d; want exit 14", err, code)
	}
	if _, errOut, err := e.run(t, false, clear); err != nil || !strings.Contains(errOut, "Budget of project testproj removed") {
		t.Errorf("clear: %q, %v", errOut, err)
	}
	if _, _, err := e.run(t, false, clear); cmdutil.ExitCodeOf(err) != cmdutil.ExitNotFound {
		t.Errorf("clear again: %v; want not found", err)
	}
}

// TestBudgetClearPeriod is the regression test of "`budget clear`
// refuses --period": --period removes that period's spend cap and keeps
// the burn cap; another period is refused and changes nothing; a budget
// with only that cap goes whole.
func TestBudgetClearPeriod(t *testing.T) {
	e := newEnv(t)
	set := func(f *cmdutil.Factory) *cobra.Command { return NewCmdBudgetSet(f, nil) }
	get := func(f *cmdutil.Factory) *cobra.Command { return NewCmdBudgetGet(f, nil) }
	clear := func(f *cmdutil.Factory) *cobra.Command { return NewCmdBudgetClear(f, nil) }
	if _, _, err := e.run(t, false, set, "--period", "week", "--amount", "50", "--burn-cap", "10"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.run(t, false, clear, "--period", "day"); cmdutil.ExitCodeOf(err) != cmdutil.ExitInvalidArgument ||
		!strings.Contains(err.Error(), "caps the spend per week, not per day") {
		t.Fatalf("clear --period day of a weekly budget: %v; want invalid argument", err)
	}
	if _, _, err := e.run(t, false, clear, "--period", "fortnight"); cmdutil.ExitCodeOf(err) != cmdutil.ExitUsage {
		t.Fatalf("clear --period fortnight: %v; want a usage error", err)
	}
	_, errOut, err := e.run(t, false, clear, "--period", "week")
	if err != nil || !strings.Contains(errOut, "The week spend cap of project testproj removed; its burn cap of $10.00/h stays") {
		t.Fatalf("clear --period week: %q, %v", errOut, err)
	}
	if out, _, err := e.run(t, false, get); err != nil || out != "project testproj\t\t0\t0\t1000\t0\trefuse\n" {
		t.Fatalf("get after clearing the week's cap: %q, %v; want the burn cap alone", out, err)
	}
	if _, _, err := e.run(t, false, set, "--period", "day", "--amount", "5"); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := e.run(t, false, clear, "--period", "day"); err != nil || !strings.Contains(errOut, "removed") {
		t.Fatalf("clear --period day: %q, %v", errOut, err)
	}
}
