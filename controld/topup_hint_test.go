package controld_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestInsufficientFundsHintFollowsTopups is the regression test of "the
// insufficient-funds hint points to top-ups that dev does not have": with
// a payment provider the hint is `gpuaas billing topup`; without one (as
// in gpuaas dev without --stripe-api) it says top-ups are off and names an
// administrator's credit.
func TestInsufficientFundsHintFollowsTopups(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		stripe  func() payments.Settings
		want    string
		wantNot string
	}{
		{"no provider", func() payments.Settings { return payments.Settings{} },
			"top-ups are off on this platform (no payment provider): an administrator can add credit (`gpuaas admin credit", "billing topup"},
		{"stripe", func() payments.Settings {
			return payments.Settings{APIBase: testutil.StripeMock(t), SecretKey: "sk_test_controld", WebhookSecret: "whsec_test",
				SuccessURL: "http://127.0.0.1/done", CancelURL: "http://127.0.0.1/cancelled"}
		}, "top up with `gpuaas billing topup`", "admin credit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := controldtest.Start(t, controldtest.Options{Stripe: tt.stripe()})
			env.Credit(t, env.Project.Name, -100_00)
			_, err := env.Client(env.AdminToken).AllocCreate(context.Background(), api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
			var e *api.Error
			if !errors.As(err, &e) || e.Code != api.CodeInsufficientFunds || !strings.Contains(e.Hint, tt.want) || strings.Contains(e.Hint, tt.wantNot) {
				t.Fatalf("create at $0: %v (hint %q); want insufficient_funds with a hint saying %q", err, e.Hint, tt.want)
			}
		})
	}
}
