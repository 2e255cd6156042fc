package daemon

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/payments"
)

// Stripe test credentials of `gpuaas dev` when the environment gives none.
// stripe-mock accepts any sk_test_ key of letters and digits.
const (
	devStripeKey     = "sk_test_gpuaasdev"
	devWebhookSecret = "whsec_gpuaas_dev"
)

// devStripe configures Stripe for `gpuaas dev --stripe-api URL`: the API
// base, test credentials (GPUAAS_STRIPE_SECRET_KEY and
// GPUAAS_STRIPE_WEBHOOK_SECRET win), controld's HTTP server on loopback,
// and Checkout pages served by it. Without --stripe-api Stripe is off.
func devStripe(opts *DevOptions) (payments.Settings, string, error) {
	if opts.StripeAPI == "" {
		return payments.Settings{}, "", nil
	}
	if u, err := url.Parse(opts.StripeAPI); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return payments.Settings{}, "", cmdutil.FlagErrorf("--stripe-api must be an http(s) URL such as http://127.0.0.1:12111, got %q", opts.StripeAPI)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.HTTPPort)))
	if err != nil {
		return payments.Settings{}, "", cmdutil.FlagErrorf("cannot listen on 127.0.0.1:%d (%v): pick another --http-port", opts.HTTPPort, err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return payments.Settings{}, "", err
	}
	base := "http://" + addr
	opts.webhookURL = base + controld.StripeWebhookPath
	s := payments.Settings{
		APIBase:       opts.StripeAPI,
		SecretKey:     envOr(os.Getenv, "GPUAAS_STRIPE_SECRET_KEY", devStripeKey),
		WebhookSecret: envOr(os.Getenv, "GPUAAS_STRIPE_WEBHOOK_SECRET", devWebhookSecret),
		SuccessURL:    fmt.Sprintf("%s%s?session_id={CHECKOUT_SESSION_ID}", base, controld.TopupDonePath),
		CancelURL:     base + controld.TopupCancelledPath,
	}
	return s, addr, nil
}
