package devenv

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestStripeOffByDefault(t *testing.T) {
	e := &Env{}
	s, addr, err := e.stripe()
	if err != nil || s.Enabled() || addr != "" || e.WebhookURL != "" {
		t.Fatalf("got %+v, %q, %v, webhook %q; want Stripe off and no HTTP server", s, addr, err, e.WebhookURL)
	}
	cfg := Config{DataDir: t.TempDir(), StripeAPI: "127.0.0.1:12111"}
	if err := cfg.CheckAndSetDefaults(); err == nil {
		t.Errorf("StripeAPI without scheme: got no error; want one")
	}
}

// The defaults must be credentials stripe-mock accepts: `gpuaas dev
// --stripe-api` against stripe-mock works with no further setup.
func TestStripeDefaultsWorkWithStripeMock(t *testing.T) {
	mock := testutil.StripeMock(t)
	cfg := Config{DataDir: t.TempDir(), StripeAPI: mock}
	if err := cfg.CheckAndSetDefaults(); err != nil {
		t.Fatal(err)
	}
	e := &Env{cfg: cfg}
	s, addr, err := e.stripe()
	if err != nil {
		t.Fatal(err)
	}
	if !s.Enabled() || !strings.HasPrefix(s.WebhookSecret, "whsec_") || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("got %+v on %q", s, addr)
	}
	if e.WebhookURL != "http://"+addr+controld.StripeWebhookPath || !strings.Contains(s.SuccessURL, addr+controld.TopupDonePath) ||
		s.CancelURL != "http://"+addr+controld.TopupCancelledPath {
		t.Errorf("webhook %q, success %q, cancel %q", e.WebhookURL, s.SuccessURL, s.CancelURL)
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
}
