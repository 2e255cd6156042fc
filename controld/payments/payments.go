// Package payments is the Stripe side of billing: it creates Checkout
// Sessions for top-ups, turns Stripe's signed webhook events into ledger
// credits (once per event, in the transaction of the credit), refunds
// through Stripe and mirrors each refund as a ledger debit, and records
// operators' manual adjustments. It owns the stripe_* tables; the money
// itself is written through controld/billing.
//
// API version: stripe-go v76 sends Stripe-Version 2023-10-16
// (stripe.APIVersion) on every request, and the webhook refuses events of
// any other version, so the objects it decodes always have the shape this
// code was written for. Configure the Stripe webhook endpoint with that
// API version.
package payments

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/checkout/session"
	"github.com/stripe/stripe-go/v76/refund"
)

// DefaultAPIBase is Stripe's API.
const DefaultAPIBase = "https://api.stripe.com"

// DefaultTolerance is how old (or how far in the future) a webhook
// signature's timestamp may be: Stripe's recommended 300 s.
const DefaultTolerance = 300 * time.Second

// APIVersion is the Stripe API version requests use and webhook events
// must carry.
const APIVersion = stripe.APIVersion

// Settings are what an operator configures.
type Settings struct {
	// APIBase is Stripe's API base URL (default DefaultAPIBase; tests and
	// `gpuaas dev --stripe-api` point it at stripe-mock).
	APIBase string
	// SecretKey is the Stripe API key. Empty disables top-ups and refunds:
	// they answer unavailable.
	SecretKey string
	// WebhookSecret is the endpoint's signing secret (whsec_…). Empty
	// disables the webhook handler.
	WebhookSecret string
	// SuccessURL and CancelURL are where Checkout sends the browser after
	// payment or cancellation. Required with SecretKey.
	SuccessURL string
	CancelURL  string
	// Currency of top-ups, a currency with cents (default "usd").
	Currency string
	// MinTopupMinor and MaxTopupMinor bound one top-up (default 5.00 and
	// 10,000.00).
	MinTopupMinor int64
	MaxTopupMinor int64
	// Tolerance of webhook timestamps (default DefaultTolerance).
	Tolerance time.Duration
}

// Enabled reports whether Stripe calls are configured.
func (s Settings) Enabled() bool { return s.SecretKey != "" }

// Config configures a Service.
type Config struct {
	Settings
	// Pool is controld's database; the webhook runs its own transactions.
	Pool *pgxpool.Pool
	// HTTPClient talks to Stripe (default: 30 s timeout).
	HTTPClient *http.Client
	Now        func() time.Time
	Log        *slog.Logger
}

// CheckAndSetDefaults validates c and fills defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.Pool == nil {
		return errors.New("payments: Pool is required")
	}
	if c.APIBase == "" {
		c.APIBase = DefaultAPIBase
	}
	if u, err := url.Parse(c.APIBase); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("payments: Stripe API base %q is not an http(s) URL", c.APIBase)
	}
	c.APIBase = strings.TrimRight(c.APIBase, "/")
	if c.SecretKey != "" && (c.SuccessURL == "" || c.CancelURL == "") {
		return errors.New("payments: a Stripe secret key needs the Checkout success and cancel URLs")
	}
	if c.Currency == "" {
		c.Currency = "usd"
	}
	c.Currency = strings.ToLower(c.Currency)
	if c.MinTopupMinor == 0 {
		c.MinTopupMinor = 500
	}
	if c.MaxTopupMinor == 0 {
		c.MaxTopupMinor = 1_000_000
	}
	if c.MinTopupMinor <= 0 || c.MaxTopupMinor < c.MinTopupMinor {
		return fmt.Errorf("payments: top-up bounds %d..%d are not a positive range", c.MinTopupMinor, c.MaxTopupMinor)
	}
	if c.Tolerance == 0 {
		c.Tolerance = DefaultTolerance
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Service talks to Stripe and records what it did.
type Service struct {
	cfg      Config
	sessions *session.Client
	refunds  *refund.Client
}

// New returns a Service. It does not contact Stripe.
func New(cfg Config) (*Service, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:           stripe.String(cfg.APIBase),
		HTTPClient:    cfg.HTTPClient,
		LeveledLogger: slogLogger{cfg.Log},
		// Retries are safe: every request carries an idempotency key.
		MaxNetworkRetries: stripe.Int64(2),
	})
	return &Service{cfg: cfg,
		sessions: &session.Client{B: backend, Key: cfg.SecretKey},
		refunds:  &refund.Client{B: backend, Key: cfg.SecretKey},
	}, nil
}

// Settings returns the service's settings, defaults filled in.
func (s *Service) Settings() Settings { return s.cfg.Settings }

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// slogLogger lets stripe-go log through controld's logger.
type slogLogger struct{ log *slog.Logger }

// Debugf drops stripe-go's debug lines: they hold whole responses.
func (l slogLogger) Debugf(string, ...any) {}
func (l slogLogger) Infof(format string, v ...any) {
	l.log.Debug("stripe: " + fmt.Sprintf(format, v...))
}
func (l slogLogger) Warnf(format string, v ...any) {
	l.log.Warn("stripe: " + fmt.Sprintf(format, v...))
}
func (l slogLogger) Errorf(format string, v ...any) {
	l.log.Warn("stripe: " + fmt.Sprintf(format, v...))
}
