package payments

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
)

// requestKey identifies a mutation for Stripe's idempotency: the actor
// and their Idempotency-Key, as mutate keys its records. The actor is
// part of it because two users may well send the same key: each must get
// a Checkout Session (or refund) of their own, not the other's.
func requestKey(r *endpoint.Request) string {
	return r.Principal.UserID + "\n" + r.IdempotencyKey
}

// billingTopup creates a Stripe Checkout Session for a project the caller
// may write to (owner or member); the webhook credits it once paid.
func (h handlers) billingTopup(ctx context.Context, r *endpoint.Request, req api.TopupRequest) (endpoint.Work[api.TopupResponse], error) {
	ref, err := project.Ref(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	req.Project = ref
	if !h.Payments.Settings().Enabled() {
		return nil, ErrNotConfigured
	}
	if err := h.Payments.ValidateAmount(req.AmountMinor); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.TopupResponse, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, req.Project, r.Principal.UserID, r.Principal.Role, project.AccessWrite)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		resp, err := h.Payments.CreateCheckout(ctx, tx, CheckoutInput{ProjectID: p.ID, ProjectName: p.Name,
			UserID: r.Principal.UserID, AmountMinor: req.AmountMinor, RequestKey: requestKey(r)})
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &resp, mutate.Effect{Audit: audit.Entry{Action: api.EndpointBillingTopup, TargetType: "project",
			TargetID: p.ID, ProjectID: p.ID, Detail: resp}}, nil
	}, nil
}

// adminRefund refunds a paid top-up through Stripe and mirrors it in the
// ledger (admins).
func (h handlers) adminRefund(_ context.Context, r *endpoint.Request, req api.RefundRequest) (endpoint.Work[api.RefundResponse], error) {
	if !h.Payments.Settings().Enabled() {
		return nil, ErrNotConfigured
	}
	if req.Topup == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "which top-up? give its checkout session (cs_…) or payment intent (pi_…)")
	}
	if req.AmountMinor < 0 {
		return nil, api.Errorf(api.CodeInvalidArgument, "a refund amount must be positive")
	}
	if err := ValidateReason(req.Reason, false); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.RefundResponse, mutate.Effect, error) {
		return endpoint.PointerEffect(h.Payments.Refund(ctx, tx, RefundInput{RefundRequest: req,
			ActorID: r.Principal.UserID, RequestKey: requestKey(r)}))
	}, nil
}
