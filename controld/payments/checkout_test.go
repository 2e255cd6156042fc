package payments_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestCheckoutSessionAgainstStripeMock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	resp, err := f.checkout(t, f.svc, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.SessionID, "cs_") || !strings.HasPrefix(resp.URL, "https://") {
		t.Errorf("got session %q url %q; want a cs_ id and an https URL", resp.SessionID, resp.URL)
	}
	if resp.AmountMinor != 5000 || resp.Currency != "usd" || resp.ProjectID != f.projectID {
		t.Errorf("got %+v", resp)
	}
	if n := f.count(t, `SELECT count(*) FROM stripe_checkout_sessions WHERE id = $1 AND project_id = $2 AND user_id = $3
		AND amount_minor = 5000 AND currency = 'usd' AND url = $4 AND state = 'open'`, resp.SessionID, f.projectID, f.userID, resp.URL); n != 1 {
		t.Error("the session is not recorded as created")
	}
}

func TestCheckoutRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadBase := "http://" + closed.Addr().String()
	closed.Close()
	base := f.svc.Settings()
	withKey := func(key string) payments.Settings { s := base; s.SecretKey = key; return s }
	withBase := func(u string) payments.Settings { s := base; s.APIBase = u; return s }
	tests := []struct {
		name     string
		settings payments.Settings
		amount   int64
		want     api.Code
	}{
		{"below the minimum", base, 499, api.CodeInvalidArgument},
		{"above the maximum", base, 1_000_001, api.CodeInvalidArgument},
		{"negative", base, -5000, api.CodeInvalidArgument},
		{"Stripe not configured", payments.Settings{}, 5000, api.CodeUnavailable},
		{"key Stripe refuses", withKey("not-a-stripe-key"), 5000, api.CodeUnavailable},
		{"Stripe unreachable", withBase(deadBase), 5000, api.CodeUnavailable},
	}
	for _, tt := range tests {
		svc := f.service(t, tt.settings)
		_, err := f.checkout(t, svc, tt.amount)
		var e *api.Error
		if !errors.As(err, &e) || e.Code != tt.want {
			t.Errorf("%s: got %v; want %s", tt.name, err, tt.want)
		}
	}
	if _, err := f.checkout(t, f.service(t, payments.Settings{}), 5000); !errors.Is(err, payments.ErrNotConfigured) {
		t.Errorf("not configured: got %v; want ErrNotConfigured", err)
	}
	if n := f.count(t, `SELECT count(*) FROM stripe_checkout_sessions`); n != 0 {
		t.Errorf("got %d sessions recorded; want 0", n)
	}
}

func TestConfigChecks(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name string
		s    payments.Settings
	}{
		{"key without redirect URLs", payments.Settings{SecretKey: "sk_test_x"}},
		{"API base not a URL", payments.Settings{APIBase: "127.0.0.1:12111"}},
		{"inverted bounds", payments.Settings{MinTopupMinor: 500, MaxTopupMinor: 100}},
	}
	for _, tt := range tests {
		if _, err := payments.New(payments.Config{Settings: tt.s, Pool: f.app}); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
	if _, err := payments.New(payments.Config{}); err == nil {
		t.Error("no pool: accepted")
	}
}
