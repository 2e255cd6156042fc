package payments

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/stripe/stripe-go/v76"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
)

// StripeActor is the actor of what Stripe's events cause, in the audit log.
const StripeActor = "stripe"

// checkoutRow is a recorded Checkout Session.
type checkoutRow struct {
	ID, ProjectID, UserID, Currency, State string
	AmountMinor, PaidMinor, RefundedMinor  int64
	PaymentIntent                          *string
}

const checkoutColumns = `id, project_id, user_id, currency, state, amount_minor, paid_minor, refunded_minor, payment_intent`

func scanCheckout(row pgx.Row) (checkoutRow, error) {
	var c checkoutRow
	err := row.Scan(&c.ID, &c.ProjectID, &c.UserID, &c.Currency, &c.State, &c.AmountMinor, &c.PaidMinor, &c.RefundedMinor, &c.PaymentIntent)
	return c, err
}

// creditCheckout credits the project of a paid Checkout Session we
// created, once per session: the session row is locked, and a session
// already paid (its completion and async-success events both arrive for
// some payment methods) is not credited again. The ledger's (kind,
// reference) uniqueness, with the session id as reference, backs that up.
//
// The credit is the amount controld asked for when it created the
// session (stripe_checkout_sessions.amount_minor), never the event's own
// figure: an event for a session that is not ours, or whose currency,
// amount or project differ from what was created, credits nothing and is
// audited (billing.topup_refused) for an operator to look at.
func (s *Service) creditCheckout(ctx context.Context, tx pgx.Tx, ev stripe.Event) (string, error) {
	var cs stripe.CheckoutSession
	if err := json.Unmarshal(ev.Data.Raw, &cs); err != nil || cs.ID == "" {
		s.cfg.Log.Warn("stripe webhook: undecodable checkout session", "event", ev.ID, "err", err)
		return OutcomeMismatch, nil
	}
	if cs.PaymentStatus != stripe.CheckoutSessionPaymentStatusPaid {
		// Delayed payment methods complete unpaid; their
		// checkout.session.async_payment_succeeded event credits later.
		return OutcomeNotPaid, nil
	}
	row, err := scanCheckout(tx.QueryRow(ctx, `SELECT `+checkoutColumns+` FROM stripe_checkout_sessions
		WHERE id = $1 FOR UPDATE`, cs.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		// Not one of ours (another integration on the same account, or a
		// forged event).
		s.cfg.Log.Warn("stripe webhook: unknown checkout session", "event", ev.ID, "session", cs.ID)
		return OutcomeUnknown, s.auditRefusedTopup(ctx, tx, ev, &cs, nil, "unknown checkout session")
	}
	if err != nil {
		return "", wrap("load checkout session", err)
	}
	if row.State == "paid" {
		return OutcomeAlready, nil
	}
	if why := mismatch(&cs, row); why != "" {
		s.cfg.Log.Error("stripe webhook: paid checkout session does not match what was created; not credited",
			"event", ev.ID, "session", cs.ID, "why", why, "amount", cs.AmountTotal, "want_amount", row.AmountMinor,
			"currency", cs.Currency, "want_currency", row.Currency, "client_reference_id", cs.ClientReferenceID, "project", row.ProjectID)
		return OutcomeMismatch, s.auditRefusedTopup(ctx, tx, ev, &cs, &row, why)
	}
	amount, currency := row.AmountMinor, row.Currency
	var pi *string
	if cs.PaymentIntent != nil && cs.PaymentIntent.ID != "" {
		pi = &cs.PaymentIntent.ID
	}
	now := s.now()
	entry, inserted, err := billing.Append(ctx, tx, billing.Entry{
		ProjectID: row.ProjectID, Kind: billing.KindTopup, Reference: cs.ID, AmountMinor: amount,
		Currency: currency, Memo: "Stripe top-up " + cs.ID, ActorID: row.UserID, CreatedAt: now,
	})
	if err != nil {
		return "", wrap("credit top-up", err)
	}
	if !inserted {
		return OutcomeAlready, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE stripe_checkout_sessions SET state = 'paid', payment_intent = $2,
		paid_minor = $3, paid_at = $4, paid_event_id = $5 WHERE id = $1`, cs.ID, pi, amount, now, ev.ID); err != nil {
		return "", wrap("mark checkout session paid", err)
	}
	detail := map[string]any{"session_id": cs.ID, "amount_minor": amount, "currency": currency,
		"event_id": ev.ID, "ledger_entry_id": entry.ID, "user_id": row.UserID}
	if pi != nil {
		detail["payment_intent"] = *pi
	}
	if err := audit.Write(ctx, tx, audit.Meta{At: now, ActorID: StripeActor, CorrelationID: ev.ID},
		audit.Entry{Action: api.EventTopup, TargetType: "project", TargetID: row.ProjectID, ProjectID: row.ProjectID, Detail: detail}); err != nil {
		return "", err
	}
	users, err := project.MemberIDs(ctx, tx, row.ProjectID)
	if err != nil {
		return "", err
	}
	if _, err := outbox.Enqueue(ctx, tx, now, outbox.Event{Kind: api.EventTopup, Subject: cs.ID,
		ProjectID: row.ProjectID, Users: users, Payload: detail}); err != nil {
		return "", err
	}
	return OutcomeCredited, nil
}

// mismatch says how a paid session in an event differs from the one we
// created ("" when it does not).
func mismatch(cs *stripe.CheckoutSession, row checkoutRow) string {
	switch {
	case strings.ToLower(string(cs.Currency)) != row.Currency:
		return "currency differs"
	case cs.AmountTotal != row.AmountMinor:
		return "amount differs"
	case cs.ClientReferenceID != "" && cs.ClientReferenceID != row.ProjectID:
		return "project differs"
	}
	return ""
}

// auditRefusedTopup records a paid Checkout Session that credited nothing
// (row is nil for a session we did not create), in the webhook's
// transaction.
func (s *Service) auditRefusedTopup(ctx context.Context, tx pgx.Tx, ev stripe.Event, cs *stripe.CheckoutSession, row *checkoutRow, why string) error {
	detail := map[string]any{"session_id": cs.ID, "event_id": ev.ID, "reason": why,
		"event_amount_minor": cs.AmountTotal, "event_currency": strings.ToLower(string(cs.Currency))}
	entry := audit.Entry{Action: "billing.topup_refused", TargetType: "stripe_checkout_session", TargetID: cs.ID, Detail: detail}
	if row != nil {
		detail["amount_minor"], detail["currency"], detail["user_id"] = row.AmountMinor, row.Currency, row.UserID
		entry.ProjectID = row.ProjectID
	}
	return audit.Write(ctx, tx, audit.Meta{At: s.now(), ActorID: StripeActor, CorrelationID: ev.ID}, entry)
}
