package billing

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var start = time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)

// env is a real controld with a funded project and one allocation that
// was active for 10 minutes at 2 × 350/GPU-hour (116 cents), then released.
type env struct {
	*controldtest.Env
	clock *testutil.Clock
	alloc string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clock := testutil.NewClock(start)
	e := &env{Env: controldtest.Start(t, controldtest.Options{Now: clock.Now, Unfunded: true,
		Billing: controld.BillingConfig{Window: time.Minute}}), clock: clock}
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	// Credited first: a create wants a balance.
	err := pgx.BeginFunc(ctx, e.Server.Pool(), func(tx pgx.Tx) error {
		_, _, err := billing.Append(ctx, tx, billing.Entry{ProjectID: e.Project.ID, Kind: billing.KindAdjustment,
			Reference: "cli-test", AmountMinor: 50_00, Memo: "welcome", ActorID: e.Admin.ID, CreatedAt: clock.Now()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	e.alloc = a.ID
	err = pgx.BeginFunc(ctx, e.Server.Pool(), func(tx pgx.Tx) error {
		_, err := alloc.ProvisionDone(ctx, tx, a.ID, hostproto.TaskSucceeded, "", clock.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Minute)
	if _, err := e.Server.BillingTick(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) run(t *testing.T, tty bool, build func(*cmdutil.Factory) *cobra.Command, args ...string) (string, string, error) {
	t.Helper()
	ios, _, out, errOut := cmdutil.Test()
	ios.SetStdoutTTY(tty)
	ios.SetStderrTTY(tty)
	ios.SetNoColor(true)
	f := &cmdutil.Factory{IOStreams: ios, Now: e.clock.Now,
		Client: func() (*api.Client, error) { return e.Client(e.AdminToken), nil }}
	cmd := build(f)
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	_, err := cmd.ExecuteC()
	return out.String(), errOut.String(), err
}

func TestBillingCommandsAgainstControld(t *testing.T) {
	e := newEnv(t)
	balance := func(f *cmdutil.Factory) *cobra.Command { return NewCmdBalance(f, nil) }
	ledger := func(f *cmdutil.Factory) *cobra.Command { return NewCmdLedger(f, nil) }
	usage := func(f *cmdutil.Factory) *cobra.Command { return NewCmdUsage(f, nil) }
	for _, tc := range []struct {
		name  string
		build func(*cmdutil.Factory) *cobra.Command
		tty   bool
		args  []string
		want  string
	}{
		{"balance tty", balance, true, nil, "testproj  $48.84\n  running     0 allocations, $0.00/hour\n  warn below  $10.00\n"},
		{"balance piped", balance, false, nil, "testproj\t4884\tusd\t0\n"},
		{"balance json", balance, false, []string{"--json", "balance_minor,currency"}, `{"balance_minor":4884,"currency":"usd"}` + "\n"},
		{"ledger jq", ledger, false, []string{"--jq", `.[] | [.kind, .amount_minor] | @tsv`}, "usage\t-116\nadjustment\t5000\n"},
		{"ledger piped", ledger, false, []string{"--limit", "1"}, "usage\t-116\tusage:" + e.alloc},
		{"usage template", usage, false, []string{"--template", `{{range .}}{{.allocation_id}} {{.seconds}} {{.amount_minor}}{{end}}`},
			e.alloc + " 600 116"},
		{"usage tty", usage, true, nil, "total $1.16\n"},
		{"usage of one allocation", usage, false, []string{"--alloc", e.alloc, "--json", "windows"}, `[{"windows":[{"amount_minor":116,"end":"2026-08-01T10:10:00Z","seconds":600,`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := e.run(t, tc.tty, tc.build, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("got\n%s\nwant it to contain\n%s", out, tc.want)
			}
		})
	}
	// Bad input: usage errors before anything is sent, server errors mapped.
	if _, _, err := e.run(t, false, ledger, "--limit", "0"); !errors.As(err, new(*cmdutil.FlagError)) {
		t.Errorf("--limit 0: %v; want a usage error", err)
	}
	if _, _, err := e.run(t, false, usage, "--alloc", "a-nope"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("unknown allocation: %v; want not found", err)
	}
	// The project comes from the global -p/--project (the client's
	// Gpuaas-Project header), as for every project-scoped command.
	ios, _, _, _ := cmdutil.Test()
	f := &cmdutil.Factory{IOStreams: ios, Now: e.clock.Now,
		Client: func() (*api.Client, error) { return e.Client(e.AdminToken, api.WithProject("ghost")), nil }}
	cmd := NewCmdBalance(f, nil)
	cmd.SetArgs(nil)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if _, err := cmd.ExecuteC(); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("unknown project: %v; want not found", err)
	}
}

func TestPrintBalanceDepleted(t *testing.T) {
	ios, _, out, _ := cmdutil.Test()
	ios.SetStdoutTTY(true)
	ios.SetNoColor(true)
	ends := start.Add(10 * time.Minute)
	err := printBalance(ios, start, &api.BillingBalance{Project: "p", BalanceMinor: -3, Currency: "usd",
		LowBalance: true, LowBalanceThresholdMinor: 1000, BurnRateMinorPerHour: 700, RunningAllocations: 1, GraceEndsAt: &ends})
	if err != nil {
		t.Fatal(err)
	}
	want := "p  -$0.03\n  running     1 allocations, $7.00/hour\n  warn below  $10.00\n  depleted    allocations are released"
	if !strings.HasPrefix(out.String(), want) {
		t.Errorf("got\n%s\nwant prefix\n%s", out.String(), want)
	}
}
