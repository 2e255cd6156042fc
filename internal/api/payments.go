package api

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// EventTopup is published when a Stripe payment credits a project, and
// EventRefund and EventAdjustment when an admin refunds or adjusts.
const (
	EventTopup      = "billing.topup"
	EventRefund     = "billing.refund"
	EventAdjustment = "billing.adjustment"
)

// TopupRequest asks for a Stripe Checkout Session that credits a project
// once paid.
type TopupRequest struct {
	// Project to credit (default: the Gpuaas-Project header).
	Project string `json:"project,omitempty"`
	// AmountMinor is the amount in minor units (cents).
	AmountMinor int64 `json:"amount_minor"`
}

// TopupResponse is a Checkout Session waiting for payment. The project is
// credited when Stripe reports it paid (the webhook), not before.
type TopupResponse struct {
	SessionID   string `json:"session_id"`
	URL         string `json:"url"`
	ProjectID   string `json:"project_id"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
}

// RefundRequest refunds (part of) a paid top-up through Stripe.
type RefundRequest struct {
	// Topup is the top-up's reference: its Checkout Session id (cs_…) or
	// its payment intent (pi_…).
	Topup string `json:"topup"`
	// AmountMinor to refund; 0 refunds all that remains refundable.
	AmountMinor int64 `json:"amount_minor,omitempty"`
	// Reason is kept in the audit log.
	Reason string `json:"reason,omitempty"`
}

// RefundResponse describes a refund made at Stripe and mirrored in the
// ledger as a debit.
type RefundResponse struct {
	RefundID      string `json:"refund_id"`
	Topup         string `json:"topup"`
	PaymentIntent string `json:"payment_intent"`
	ProjectID     string `json:"project_id"`
	AmountMinor   int64  `json:"amount_minor"`
	Currency      string `json:"currency"`
	// RefundedMinor is what has been refunded of the top-up so far, this
	// refund included; RemainingMinor is what may still be refunded.
	RefundedMinor  int64 `json:"refunded_minor"`
	RemainingMinor int64 `json:"remaining_minor"`
	LedgerEntryID  int64 `json:"ledger_entry_id"`
}

// CreditRequest is an operator's manual adjustment of a project's balance.
type CreditRequest struct {
	Project string `json:"project"`
	// AmountMinor credits when positive and debits when negative.
	AmountMinor int64 `json:"amount_minor"`
	// Reason is required and kept with the entry and in the audit log.
	Reason string `json:"reason"`
}

// CreditResponse is the adjustment as recorded.
type CreditResponse struct {
	LedgerEntryID int64  `json:"ledger_entry_id"`
	ProjectID     string `json:"project_id"`
	AmountMinor   int64  `json:"amount_minor"`
	Currency      string `json:"currency"`
	Reason        string `json:"reason"`
	BalanceMinor  int64  `json:"balance_minor"`
}

// BillingTopup starts a Stripe top-up and returns the Checkout URL.
func (c *Client) BillingTopup(ctx context.Context, req TopupRequest, opts ...CallOption) (*TopupResponse, error) {
	return Do(ctx, c, OpBillingTopup, req, opts...)
}

// AdminRefund refunds a top-up through Stripe (admins).
func (c *Client) AdminRefund(ctx context.Context, req RefundRequest, opts ...CallOption) (*RefundResponse, error) {
	return Do(ctx, c, OpAdminRefund, req, opts...)
}

// AdminCredit adjusts a project's balance by hand (admins).
func (c *Client) AdminCredit(ctx context.Context, req CreditRequest, opts ...CallOption) (*CreditResponse, error) {
	return Do(ctx, c, OpAdminCredit, req, opts...)
}

// ParseMinor reads an amount in major units with at most two decimals
// ("50", "12.5", "-3.25") as minor units (5000, 1250, -325). Amounts are
// in a currency with cents (usd, eur); larger than ±10^13 is refused.
func ParseMinor(s string) (int64, error) {
	s = strings.TrimSpace(s)
	neg := false
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		neg, s = true, rest
	}
	whole, frac, hasFrac := strings.Cut(s, ".")
	if whole == "" || (hasFrac && (frac == "" || len(frac) > 2)) || !digits(whole) || !digits(frac) {
		return 0, fmt.Errorf("%q is not an amount: use digits with at most two decimals, like 50 or 12.50", s)
	}
	if len(whole) > 13 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an amount: %w", s, err)
	}
	for len(frac) < 2 {
		frac += "0"
	}
	f, _ := strconv.ParseInt(frac, 10, 64) // two digits, checked above
	v := w*100 + f
	if neg {
		v = -v
	}
	return v, nil
}

func digits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
