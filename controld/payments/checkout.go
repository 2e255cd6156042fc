package payments

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/jackc/pgx/v5"
	"github.com/stripe/stripe-go/v76"

	"github.com/gpuaas/gpuaas/internal/api"
)

// CheckoutInput is one top-up request, already authorized.
type CheckoutInput struct {
	ProjectID   string
	ProjectName string
	UserID      string
	AmountMinor int64
	// RequestKey identifies the request (actor and Idempotency-Key), so
	// that a retry after a failed transaction gets the same Checkout
	// Session from Stripe rather than a second one.
	RequestKey string
}

// ValidateAmount checks a top-up amount against the configured bounds.
func (s *Service) ValidateAmount(amount int64) error {
	c := s.cfg
	if amount < c.MinTopupMinor || amount > c.MaxTopupMinor {
		return api.Errorf(api.CodeInvalidArgument, "a top-up must be between %s and %s, got %s",
			api.FormatMoney(c.MinTopupMinor, c.Currency), api.FormatMoney(c.MaxTopupMinor, c.Currency),
			api.FormatMoney(amount, c.Currency))
	}
	return nil
}

// CreateCheckout creates a Stripe Checkout Session for in and records it
// in tx, so that the webhook can credit the right project once Stripe
// reports it paid. The Stripe call happens inside the transaction: if the
// transaction then fails, the session is never recorded and can never
// credit anything, and a retry reuses it through the idempotency key.
func (s *Service) CreateCheckout(ctx context.Context, tx pgx.Tx, in CheckoutInput) (api.TopupResponse, error) {
	if !s.cfg.Enabled() {
		return api.TopupResponse{}, ErrNotConfigured
	}
	if err := s.ValidateAmount(in.AmountMinor); err != nil {
		return api.TopupResponse{}, err
	}
	meta := map[string]string{"project_id": in.ProjectID, "user_id": in.UserID}
	params := &stripe.CheckoutSessionParams{
		Mode:              stripe.String(string(stripe.CheckoutSessionModePayment)),
		SuccessURL:        stripe.String(s.cfg.SuccessURL),
		CancelURL:         stripe.String(s.cfg.CancelURL),
		ClientReferenceID: stripe.String(in.ProjectID),
		Metadata:          meta,
		PaymentIntentData: &stripe.CheckoutSessionPaymentIntentDataParams{Metadata: meta},
		LineItems: []*stripe.CheckoutSessionLineItemParams{{
			Quantity: stripe.Int64(1),
			PriceData: &stripe.CheckoutSessionLineItemPriceDataParams{
				Currency:   stripe.String(s.cfg.Currency),
				UnitAmount: stripe.Int64(in.AmountMinor),
				ProductData: &stripe.CheckoutSessionLineItemPriceDataProductDataParams{
					Name: stripe.String("gpuaas credit for project " + in.ProjectName),
				},
			},
		}},
	}
	params.Context = ctx
	params.SetIdempotencyKey(stripeKey("checkout", in.RequestKey))
	cs, err := s.sessions.New(params)
	if err != nil {
		return api.TopupResponse{}, stripeError("create checkout session", err)
	}
	if cs.ID == "" || cs.URL == "" {
		return api.TopupResponse{}, api.Errorf(api.CodeUnavailable, "Stripe answered a Checkout Session without id or URL")
	}
	if _, err := tx.Exec(ctx, `INSERT INTO stripe_checkout_sessions
		(id, project_id, user_id, amount_minor, currency, url, state, created_at)
		VALUES ($1,$2,$3,$4,$5,$6,'open',$7)`,
		cs.ID, in.ProjectID, in.UserID, in.AmountMinor, s.cfg.Currency, cs.URL, s.now()); err != nil {
		return api.TopupResponse{}, wrap("record checkout session", err)
	}
	return api.TopupResponse{SessionID: cs.ID, URL: cs.URL, ProjectID: in.ProjectID,
		AmountMinor: in.AmountMinor, Currency: s.cfg.Currency}, nil
}

// stripeKey derives a Stripe Idempotency-Key (at most 255 characters)
// from what identifies one of our requests.
func stripeKey(op, requestKey string) string {
	sum := sha256.Sum256([]byte(op + "\n" + requestKey))
	return "gpuaas-" + op + "-" + hex.EncodeToString(sum[:16])
}
