// Package billingapi is the billing endpoints (docs/decisions/0069-domain-endpoints.md):
// balances, the ledger and its check, usage, and budgets (docs/budgets.md).
// They are not in controld/billing because they read allocations, jobs,
// workloads and volumes, whose packages import billing.
package billingapi

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// DB is the database as the billing reads use it: queries and batches
// (alloc.Get), and the read-only snapshots usage is read in.
type DB interface {
	store.Batcher
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Deps are what the billing endpoints need of the server.
type Deps struct {
	// DB serves the reads outside a mutation's transaction.
	DB DB
	// Settings are billing's (the low-balance threshold and the grace
	// period a balance reads).
	Settings billing.Settings
	Now      func() time.Time
}

// Endpoints are the billing reads, the ledger check and budgets; top-ups,
// refunds and credits are the payments endpoints.
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Query(api.OpBillingBalance, h.billingBalance),
		endpoint.Query(api.OpBillingLedger, h.billingLedger),
		endpoint.Query(api.OpBillingUsage, h.billingUsage),
		endpoint.Query(api.OpOpsLedgerVerify, h.ledgerVerify),
		endpoint.Mutation(api.OpBillingBudgetSet, h.budgetSet),
		endpoint.Query(api.OpBillingBudgetGet, h.budgetGet),
		endpoint.Mutation(api.OpBillingBudgetClear, h.budgetClear),
	}
}

type handlers struct{ Deps }

// Project resolves the project of a billing read (project.Ref) and checks
// that the caller may read it.
func Project(ctx context.Context, q store.Querier, r *endpoint.Request, ref string) (api.Project, error) {
	ref, err := project.Ref(ctx, q, r, ref)
	if err != nil {
		return api.Project{}, err
	}
	return project.Authorize(ctx, q, ref, r.Principal.UserID, r.Principal.Role, project.AccessRead)
}
