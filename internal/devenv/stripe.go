package devenv

import (
	"fmt"
	"net"
	"strconv"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/payments"
)

// stripe configures Stripe when Config.StripeAPI is set: the API base,
// the test credentials, controld's HTTP server on loopback (its address is
// returned) and Checkout pages served by it. Without StripeAPI Stripe is
// off.
func (e *Env) stripe() (payments.Settings, string, error) {
	if e.cfg.StripeAPI == "" {
		return payments.Settings{}, "", nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(e.cfg.HTTPPort)))
	if err != nil {
		return payments.Settings{}, "", fmt.Errorf("stripe webhooks: cannot listen on 127.0.0.1:%d: %w", e.cfg.HTTPPort, err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return payments.Settings{}, "", err
	}
	base := "http://" + addr
	e.WebhookURL = base + controld.StripeWebhookPath
	s := payments.Settings{
		APIBase:       e.cfg.StripeAPI,
		SecretKey:     e.cfg.StripeSecretKey,
		WebhookSecret: e.cfg.StripeWebhookSecret,
		SuccessURL:    fmt.Sprintf("%s%s?session_id={CHECKOUT_SESSION_ID}", base, controld.TopupDonePath),
		CancelURL:     base + controld.TopupCancelledPath,
	}
	return s, addr, nil
}
