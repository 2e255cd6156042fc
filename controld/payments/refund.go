package payments

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/stripe/stripe-go/v76"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
)

// MaxReasonLength bounds the reason of a refund or an adjustment.
const MaxReasonLength = 500

// RefundInput is one refund request, already authorized (admins).
type RefundInput struct {
	api.RefundRequest
	ActorID string
	// RequestKey identifies the request (actor and Idempotency-Key); it
	// becomes Stripe's idempotency key, so a retry after a failed
	// transaction gets the same refund back instead of a second one.
	RequestKey string
}

// ValidateReason checks a reason: required or not, and not too long.
func ValidateReason(reason string, required bool) error {
	switch {
	case required && strings.TrimSpace(reason) == "":
		return api.Errorf(api.CodeInvalidArgument, "a reason is required").WithHint("pass --reason, it goes to the audit log")
	case len(reason) > MaxReasonLength:
		return api.Errorf(api.CodeInvalidArgument, "the reason is longer than %d characters", MaxReasonLength)
	}
	return api.CheckText("reason", reason)
}

// Refund refunds a paid top-up through Stripe and mirrors the refund as a
// ledger debit (kind refund, reference the refund id) in tx, together with
// its audit row and event. The top-up is locked, so concurrent refunds of
// it cannot together exceed what was paid. A refund larger than the
// project's balance is refused: credit already spent on GPUs is not
// returned as money.
//
// The Stripe call is made inside the transaction. Should the transaction
// fail after Stripe refunded, nothing is recorded; retrying the request
// with the same Idempotency-Key gets the same refund from Stripe and
// records it.
func (s *Service) Refund(ctx context.Context, tx pgx.Tx, in RefundInput) (api.RefundResponse, mutate.Effect, error) {
	var none mutate.Effect
	if !s.cfg.Enabled() {
		return api.RefundResponse{}, none, ErrNotConfigured
	}
	if in.AmountMinor < 0 {
		return api.RefundResponse{}, none, api.Errorf(api.CodeInvalidArgument, "a refund amount must be positive")
	}
	if err := ValidateReason(in.Reason, false); err != nil {
		return api.RefundResponse{}, none, err
	}
	if in.Topup == "" {
		return api.RefundResponse{}, none, api.Errorf(api.CodeInvalidArgument, "which top-up? give its checkout session (cs_…) or payment intent (pi_…)")
	}
	row, err := scanCheckout(tx.QueryRow(ctx, `SELECT `+checkoutColumns+` FROM stripe_checkout_sessions
		WHERE id = $1 OR payment_intent = $1 FOR UPDATE`, in.Topup))
	if errors.Is(err, pgx.ErrNoRows) {
		return api.RefundResponse{}, none, api.Errorf(api.CodeNotFound, "no top-up %q", in.Topup)
	}
	if err != nil {
		return api.RefundResponse{}, none, wrap("load top-up", err)
	}
	if row.State != "paid" || row.PaymentIntent == nil {
		return api.RefundResponse{}, none, api.Errorf(api.CodeConflict, "top-up %s has not been paid; there is nothing to refund", row.ID)
	}
	remaining := row.PaidMinor - row.RefundedMinor
	amount := in.AmountMinor
	if amount == 0 {
		amount = remaining
	}
	switch {
	case remaining == 0:
		return api.RefundResponse{}, none, api.Errorf(api.CodeConflict, "top-up %s is already refunded in full", row.ID)
	case amount > remaining:
		return api.RefundResponse{}, none, api.Errorf(api.CodeInvalidArgument, "top-up %s has %s left to refund; %s is more",
			row.ID, api.FormatMoney(remaining, row.Currency), api.FormatMoney(amount, row.Currency))
	}
	balance, err := billing.Balance(ctx, tx, row.ProjectID)
	if err != nil {
		return api.RefundResponse{}, none, wrap("project balance", err)
	}
	if balance < amount {
		return api.RefundResponse{}, none, api.Errorf(api.CodeInsufficientFunds,
			"project balance is %s, less than the refund of %s", api.FormatMoney(balance, row.Currency), api.FormatMoney(amount, row.Currency)).
			WithHint("refund at most the balance: credit already spent is not refunded")
	}

	params := &stripe.RefundParams{PaymentIntent: row.PaymentIntent, Amount: stripe.Int64(amount),
		Metadata: map[string]string{"project_id": row.ProjectID, "topup": row.ID, "actor_id": in.ActorID}}
	params.Context = ctx
	params.SetIdempotencyKey(stripeKey("refund", in.RequestKey))
	re, err := s.refunds.New(params)
	if err != nil {
		return api.RefundResponse{}, none, stripeError("refund", err)
	}
	if re.ID == "" {
		return api.RefundResponse{}, none, api.Errorf(api.CodeUnavailable, "Stripe answered a refund without an id")
	}
	now := s.now()
	if _, err := tx.Exec(ctx, `INSERT INTO stripe_refunds (id, session_id, amount_minor, currency, actor_id, reason, created_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7)`, re.ID, row.ID, amount, row.Currency, in.ActorID, in.Reason, now); err != nil {
		return api.RefundResponse{}, none, wrap("record refund", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE stripe_checkout_sessions SET refunded_minor = refunded_minor + $2 WHERE id = $1`,
		row.ID, amount); err != nil {
		return api.RefundResponse{}, none, wrap("record refunded amount", err)
	}
	memo := "Stripe refund " + re.ID + " of top-up " + row.ID
	if in.Reason != "" {
		memo += ": " + in.Reason
	}
	entry, inserted, err := billing.Append(ctx, tx, billing.Entry{ProjectID: row.ProjectID, Kind: billing.KindRefund,
		Reference: re.ID, AmountMinor: -amount, Currency: row.Currency, Memo: memo, ActorID: in.ActorID, CreatedAt: now})
	if err != nil {
		return api.RefundResponse{}, none, wrap("debit refund", err)
	}
	if !inserted {
		return api.RefundResponse{}, none, api.Errorf(api.CodeConflict, "refund %s is already in the ledger", re.ID)
	}
	resp := api.RefundResponse{RefundID: re.ID, Topup: row.ID, PaymentIntent: *row.PaymentIntent, ProjectID: row.ProjectID,
		AmountMinor: amount, Currency: row.Currency, RefundedMinor: row.RefundedMinor + amount,
		RemainingMinor: remaining - amount, LedgerEntryID: entry.ID}
	users, err := project.MemberIDs(ctx, tx, row.ProjectID)
	if err != nil {
		return api.RefundResponse{}, none, err
	}
	return resp, mutate.Effect{
		Audit: audit.Entry{Action: api.EndpointAdminRefund, TargetType: "project", TargetID: row.ProjectID, ProjectID: row.ProjectID,
			Detail: map[string]any{"refund": resp, "reason": in.Reason}},
		Events: []outbox.Event{{Kind: api.EventRefund, Subject: re.ID, ProjectID: row.ProjectID, Users: users, Payload: resp}},
	}, nil
}
