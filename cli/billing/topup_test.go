package billing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func topupStreams(tty bool) (*cmdutil.IOStreams, *bytes.Buffer, *bytes.Buffer) {
	ios, _, out, errOut := cmdutil.Test()
	ios.SetStdinTTY(tty)
	ios.SetStdoutTTY(tty)
	ios.SetStderrTTY(tty)
	ios.SetNoColor(true)
	return ios, out, errOut
}

func TestNewCmdTopup(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    int64
		wantErr string
	}{
		{name: "dollars", args: []string{"--amount", "50"}, want: 5000},
		{name: "cents", args: []string{"--amount", "12.5"}, want: 1250},
		{name: "json", args: []string{"--amount", "7", "--json", "url"}, want: 700},
		{name: "no amount", args: nil, wantErr: "--amount is required"},
		{name: "zero", args: []string{"--amount", "0"}, wantErr: "--amount must be more than zero"},
		{name: "negative", args: []string{"--amount=-5"}, wantErr: "--amount must be more than zero"},
		{name: "three decimals", args: []string{"--amount", "1.005"}, wantErr: "at most two decimals"},
		{name: "currency sign", args: []string{"--amount", "$50"}, wantErr: "is not an amount"},
		{name: "argument", args: []string{"--amount", "5", "extra"}, wantErr: "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := topupStreams(false)
			var got *TopupOptions
			cmd := newCmdTopup(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *TopupOptions) error { got = o; return nil })
			err := cmdtest.Execute(cmd, tt.args...)
			if tt.wantErr != "" {
				var fe *cmdutil.FlagError
				if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v; want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.AmountMinor != tt.want {
				t.Errorf("got %d; want %d", got.AmountMinor, tt.want)
			}
		})
	}
}

// stripeEnv is a real controld whose Stripe is a real stripe-mock.
func stripeEnv(t *testing.T) *controldtest.Env {
	t.Helper()
	return controldtest.Start(t, controldtest.Options{NoNodes: true,
		Stripe: payments.Settings{APIBase: testutil.StripeMock(t), SecretKey: "sk_test_cli",
			SuccessURL: "http://127.0.0.1/done", CancelURL: "http://127.0.0.1/cancelled"}})
}

func TestTopupAgainstStripeMock(t *testing.T) {
	t.Parallel()
	env := stripeEnv(t)
	client := func() (*api.Client, error) { return env.Client(env.AdminToken), nil }
	ctx := context.Background()

	// Piped: the URL alone, for scripts.
	ios, out, _ := topupStreams(false)
	if err := topupRun(ctx, &TopupOptions{IO: ios, Client: client, AmountMinor: 5000}); err != nil {
		t.Fatal(err)
	}
	url := strings.TrimSpace(out.String())
	if !strings.HasPrefix(url, "https://checkout.stripe.com/") || strings.Contains(url, "\n") {
		t.Fatalf("piped output %q; want one Checkout URL", out.String())
	}

	// On a terminal: the amount and the URL, and a word on stderr.
	ios, out, errOut := topupStreams(true)
	if err := topupRun(ctx, &TopupOptions{IO: ios, Client: client, AmountMinor: 1250}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "Pay $12.50 at:\n\n  https://checkout.stripe.com/") ||
		!strings.Contains(errOut.String(), "credited once Stripe confirms") {
		t.Errorf("terminal output %q / %q", out.String(), errOut.String())
	}

	// --json through the real command.
	ios, out, _ = topupStreams(false)
	cmd := newCmdTopup(&cmdutil.Factory{IOStreams: ios, Client: client, Now: time.Now}, nil)
	if err := cmdtest.Execute(cmd, "--amount", "20", "--json"); err != nil {
		t.Fatal(err)
	}
	var resp api.TopupResponse
	if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
		t.Fatalf("--json output %q: %v", out.String(), err)
	}
	if !strings.HasPrefix(resp.SessionID, "cs_") || resp.AmountMinor != 2000 || resp.ProjectID != env.Project.ID {
		t.Errorf("got %+v", resp)
	}
	var sessions int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM stripe_checkout_sessions WHERE project_id = $1`,
		env.Project.ID).Scan(&sessions); err != nil || sessions != 3 {
		t.Errorf("got %d sessions recorded (%v); want 3", sessions, err)
	}

	// Below the platform's minimum: controld's error, nothing created.
	ios, _, _ = topupStreams(false)
	err := topupRun(ctx, &TopupOptions{IO: ios, Client: client, AmountMinor: 100})
	if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "between $5.00 and $10000.00") {
		t.Errorf("small top-up: got %v; want invalid_argument naming the bounds", err)
	}
}

func TestTopupWithoutStripe(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ios, out, _ := topupStreams(false)
	err := topupRun(context.Background(), &TopupOptions{IO: ios, AmountMinor: 5000,
		Client: func() (*api.Client, error) { return env.Client(env.AdminToken), nil }})
	if !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), "Stripe is not configured") {
		t.Fatalf("got %v; want unavailable: Stripe is not configured", err)
	}
	if cmdutil.ExitCodeOf(err) == cmdutil.ExitOK || out.Len() != 0 {
		t.Errorf("exit %d, output %q", cmdutil.ExitCodeOf(err), out.String())
	}
}
