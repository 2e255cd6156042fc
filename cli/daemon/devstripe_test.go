package daemon

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestDevStripeOffByDefault(t *testing.T) {
	s, addr, err := devStripe(&DevOptions{})
	if err != nil || s.Enabled() || addr != "" {
		t.Fatalf("got %+v, %q, %v; want Stripe off and no HTTP server", s, addr, err)
	}
	var fe *cmdutil.FlagError
	if _, _, err := devStripe(&DevOptions{StripeAPI: "127.0.0.1:12111"}); !errors.As(err, &fe) {
		t.Errorf("URL without scheme: got %v; want a usage error", err)
	}
}

// The dev defaults must be credentials stripe-mock accepts: `gpuaas dev
// --stripe-api` against stripe-mock works with no further setup.
func TestDevStripeDefaultsWorkWithStripeMock(t *testing.T) {
	t.Setenv("GPUAAS_STRIPE_SECRET_KEY", "")
	t.Setenv("GPUAAS_STRIPE_WEBHOOK_SECRET", "")
	mock := testutil.StripeMock(t)
	opts := &DevOptions{StripeAPI: mock}
	s, addr, err := devStripe(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Enabled() || s.WebhookSecret != devWebhookSecret || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("got %+v on %q", s, addr)
	}
	if opts.webhookURL != "http://"+addr+controld.StripeWebhookPath || !strings.Contains(s.SuccessURL, addr+controld.TopupDonePath) ||
		s.CancelURL != "http://"+addr+controld.TopupCancelledPath {
		t.Errorf("webhook %q, success %q, cancel %q", opts.webhookURL, s.SuccessURL, s.CancelURL)
	}
	req, _ := http.NewRequest(http.MethodGet, mock+"/v1/balance", nil)
	req.SetBasicAuth(s.SecretKey, "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("stripe-mock with the dev key %q: got %s; want 200", s.SecretKey, resp.Status)
	}

	t.Setenv("GPUAAS_STRIPE_SECRET_KEY", "sk_test_fromenv")
	if s, _, _ = devStripe(&DevOptions{StripeAPI: mock}); s.SecretKey != "sk_test_fromenv" {
		t.Errorf("got key %q; want the environment's", s.SecretKey)
	}
}
