package payments

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/stripe/stripe-go/v76"

	"github.com/gpuaas/gpuaas/internal/api"
)

// ErrNotConfigured answers top-ups and refunds when controld has no Stripe
// key.
var ErrNotConfigured = api.Errorf(api.CodeUnavailable, "Stripe is not configured on this controld, so top-ups and refunds are unavailable").
	WithHint("an operator sets GPUAAS_STRIPE_SECRET_KEY for controld (or runs `gpuaas dev --stripe-api URL`)")

// Webhook refusals: the request is answered 400 and nothing is written.
var (
	// ErrBadSignature: the Stripe-Signature header is missing, malformed
	// or does not sign these exact bytes with the endpoint's secret.
	ErrBadSignature = errors.New("webhook signature does not match")
	// ErrStale: the signed timestamp is outside the tolerance.
	ErrStale = errors.New("webhook timestamp outside the tolerance")
	// ErrAPIVersion: the event was rendered for another API version.
	ErrAPIVersion = errors.New("webhook event API version is not " + APIVersion)
	// ErrMalformed: the signed body is not a Stripe event.
	ErrMalformed = errors.New("webhook body is not a Stripe event")
)

// stripeError turns a failed Stripe call into a catalog error: the
// caller's mistakes (a refund larger than the charge) keep Stripe's
// message; a rejected key or an unreachable Stripe is unavailable.
func stripeError(op string, err error) error {
	var se *stripe.Error
	if !errors.As(err, &se) {
		return api.Errorf(api.CodeUnavailable, "%s: cannot reach Stripe: %v", op, err).WithHint("retry in a moment")
	}
	msg := se.Msg
	if msg == "" {
		msg = string(se.Type)
	}
	switch {
	case se.HTTPStatusCode == http.StatusUnauthorized || se.HTTPStatusCode == http.StatusForbidden:
		return api.Errorf(api.CodeUnavailable, "%s: Stripe refused controld's API key: %s", op, msg).
			WithHint("an operator checks GPUAAS_STRIPE_SECRET_KEY")
	case se.HTTPStatusCode == http.StatusTooManyRequests:
		return api.Errorf(api.CodeRateLimited, "%s: Stripe is rate limiting: %s", op, msg).WithHint("retry in a moment")
	case se.HTTPStatusCode >= 400 && se.HTTPStatusCode < 500:
		return api.Errorf(api.CodeInvalidArgument, "%s: Stripe refused: %s", op, msg)
	}
	return api.Errorf(api.CodeUnavailable, "%s: Stripe failed (%d): %s", op, se.HTTPStatusCode, msg).WithHint("retry in a moment")
}

// wrap adds an operation name to an internal error; nil stays nil.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}
