package controld

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
)

// paymentsEndpoints are top-ups and refunds (controld/payments; credits
// are payments.Endpoints). They stay on the server because Stripe's
// idempotency key is the caller's Idempotency-Key (requestKey), which
// endpoint.Request does not carry.
func (s *Server) paymentsEndpoints() []endpointDef {
	return []endpointDef{
		mutation(s, api.OpBillingTopup, s.billingTopup),
		mutation(s, api.OpAdminRefund, s.adminRefund),
	}
}

// requestKey identifies a mutation for Stripe's idempotency: the actor
// and their Idempotency-Key, as mutate keys its records.
func (c *call) requestKey() string {
	return c.principal.UserID + "\n" + c.req.Headers().Get(api.HeaderIdempotencyKey)
}

// billingTopup creates a Stripe Checkout Session for a project the caller
// may write to (owner or member); the webhook credits it once paid.
func (s *Server) billingTopup(ctx context.Context, c *call, req api.TopupRequest) (work[api.TopupResponse], error) {
	ref, err := s.projectRef(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	req.Project = ref
	if !s.payments.Settings().Enabled() {
		return nil, payments.ErrNotConfigured
	}
	if err := s.payments.ValidateAmount(req.AmountMinor); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.TopupResponse, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, req.Project, c.principal.UserID, c.principal.Role, project.AccessWrite)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		resp, err := s.payments.CreateCheckout(ctx, tx, payments.CheckoutInput{ProjectID: p.ID, ProjectName: p.Name,
			UserID: c.principal.UserID, AmountMinor: req.AmountMinor, RequestKey: c.requestKey()})
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return &resp, mutate.Effect{Audit: audit.Entry{Action: api.EndpointBillingTopup, TargetType: "project",
			TargetID: p.ID, ProjectID: p.ID, Detail: resp}}, nil
	}, nil
}

// adminRefund refunds a paid top-up through Stripe and mirrors it in the
// ledger (admins).
func (s *Server) adminRefund(_ context.Context, c *call, req api.RefundRequest) (work[api.RefundResponse], error) {
	if !s.payments.Settings().Enabled() {
		return nil, payments.ErrNotConfigured
	}
	if req.Topup == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "which top-up? give its checkout session (cs_…) or payment intent (pi_…)")
	}
	if req.AmountMinor < 0 {
		return nil, api.Errorf(api.CodeInvalidArgument, "a refund amount must be positive")
	}
	if err := payments.ValidateReason(req.Reason, false); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.RefundResponse, mutate.Effect, error) {
		return pointerEffect(s.payments.Refund(ctx, tx, payments.RefundInput{RefundRequest: req,
			ActorID: c.principal.UserID, RequestKey: c.requestKey()}))
	}, nil
}
