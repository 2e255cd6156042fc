package admin

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestNewCmdRefund(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    RefundOptions
		wantErr string
	}{
		{name: "all", args: []string{"cs_1"}, want: RefundOptions{Topup: "cs_1"}},
		{name: "part", args: []string{"pi_1", "--amount", "20.5", "--reason", "dup", "-y", "--idempotency-key", "k1"},
			want: RefundOptions{Topup: "pi_1", AmountMinor: 2050, Reason: "dup", Yes: true, IdempotencyKey: "k1"}},
		{name: "no top-up", args: nil, wantErr: "requires a top-up"},
		{name: "zero", args: []string{"cs_1", "--amount", "0"}, wantErr: "more than zero"},
		{name: "bad amount", args: []string{"cs_1", "--amount", "lots"}, wantErr: "is not an amount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			var got *RefundOptions
			cmd := NewCmdRefund(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *RefundOptions) error { got = o; return nil })
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
			if got.Topup != tt.want.Topup || got.AmountMinor != tt.want.AmountMinor || got.Reason != tt.want.Reason ||
				got.Yes != tt.want.Yes || got.IdempotencyKey != tt.want.IdempotencyKey {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}

func TestRefundConfirmation(t *testing.T) {
	tests := []struct {
		name       string
		tty, yes   bool
		amount     string
		input      string
		wantErr    error
		wantPrompt string
	}{
		{"tty declined", true, false, "", "n\n", cmdutil.ErrCancelled, "Refund all that remains of top-up cs_1 through Stripe? [y/N] "},
		{"tty default is no", true, false, "20", "\n", cmdutil.ErrCancelled, "Refund 20 of top-up cs_1 through Stripe? [y/N] "},
		{"tty confirmed", true, false, "", "y\n", cmdtest.ErrReachedServer, "Refund all that remains of top-up cs_1 through Stripe? [y/N] "},
		{"tty --yes", true, true, "", "", cmdtest.ErrReachedServer, ""},
		{"piped never prompts", false, false, "", "", cmdtest.ErrReachedServer, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, in, _, errOut := cmdtest.Streams(tt.tty)
			in.WriteString(tt.input)
			opts := &RefundOptions{IO: ios, Topup: "cs_1", Amount: tt.amount, Yes: tt.yes,
				Client: func() (*api.Client, error) { return nil, cmdtest.ErrReachedServer }}
			if err := refundRun(context.Background(), opts); !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v; want %v", err, tt.wantErr)
			}
			if errOut.String() != tt.wantPrompt {
				t.Errorf("got stderr %q; want %q", errOut.String(), tt.wantPrompt)
			}
		})
	}
}

func TestNewCmdCredit(t *testing.T) {
	tests := []struct {
		name    string
		project string
		args    []string
		want    int64
		wantErr string
	}{
		{name: "credit", project: "ml", args: []string{"--amount", "25", "--reason", "outage"}, want: 2500},
		{name: "debit", project: "ml", args: []string{"--amount", "-10.50", "--reason", "oops"}, want: -1050},
		{name: "no project", args: []string{"--amount", "25", "--reason", "outage"}, wantErr: "--project is required"},
		{name: "no amount", project: "ml", args: []string{"--reason", "outage"}, wantErr: "--amount is required"},
		{name: "zero", project: "ml", args: []string{"--amount", "0", "--reason", "outage"}, wantErr: "must not be zero"},
		{name: "no reason", project: "ml", args: []string{"--amount", "5"}, wantErr: "--reason is required"},
		{name: "blank reason", project: "ml", args: []string{"--amount", "5", "--reason", "  "}, wantErr: "--reason is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			f := &cmdutil.Factory{IOStreams: ios}
			f.Flags.Project = tt.project // the root's global --project
			var got *CreditOptions
			cmd := NewCmdCredit(f, func(_ context.Context, o *CreditOptions) error { got = o; return nil })
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
			if got.AmountMinor != tt.want || got.Project != tt.project {
				t.Errorf("got %+v; want amount %d in %s", *got, tt.want, tt.project)
			}
		})
	}
}
