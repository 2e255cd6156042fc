package payments

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Deps are what the payments endpoints need of the server.
type Deps struct {
	// DB serves the reads outside a mutation's transaction.
	DB       store.Querier
	Payments *Service
}

// Endpoints are the payments endpoints (docs/decisions/0069-domain-endpoints.md):
// a member's top-up through Stripe, an admin's refund of one, and an
// operator's manual credit.
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Mutation(api.OpBillingTopup, h.billingTopup), // endpoints_topup.go
		endpoint.Mutation(api.OpAdminRefund, h.adminRefund),
		endpoint.Mutation(api.OpAdminCredit, h.adminCredit),
	}
}

type handlers struct{ Deps }

// adminCredit records an operator's manual credit or debit with its
// reason (admins).
func (h handlers) adminCredit(ctx context.Context, r *endpoint.Request, req api.CreditRequest) (endpoint.Work[api.CreditResponse], error) {
	ref, err := project.Ref(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	req.Project = ref
	if err := ValidateAdjustment(req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.CreditResponse, mutate.Effect, error) {
		p, err := project.Resolve(ctx, tx, req.Project)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return endpoint.PointerEffect(h.Payments.Adjust(ctx, tx, p.ID, r.Principal.UserID, req))
	}, nil
}
