package allocapi

import (
	"context"
	"errors"
	"time"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/store"
)

// FundsRefusal records a create refused for insufficient funds or over a
// budget, as action (alloc.create_refused, volume.create_refused), in a
// write of its own to db (the create's transaction was rolled back): who
// tried to rent what, and the balance and burn that fell short. Other
// errors are not recorded. Allocations and volumes
// (volumesapi.Deps.FundsRefusal) share it.
func FundsRefusal(db store.Querier, now func() time.Time, action string) endpoint.Refusal {
	return func(ctx context.Context, r *endpoint.Request, err error) {
		var funds *alloc.InsufficientFundsError
		var over *alloc.BudgetExceededError
		var entry audit.Entry
		switch {
		case errors.As(err, &funds):
			entry = audit.Entry{Action: action, TargetType: "project", TargetID: funds.Funds.ProjectID,
				ProjectID: funds.Funds.ProjectID, Detail: funds.AuditDetail()}
		case errors.As(err, &over):
			entry = audit.Entry{Action: action, TargetType: "project", TargetID: over.Req.ProjectID,
				ProjectID: over.Req.ProjectID, Detail: over.AuditDetail()}
		default:
			return
		}
		meta := audit.Meta{At: now(), ActorID: r.Principal.UserID, CorrelationID: r.Corr,
			IdempotencyKey: r.IdempotencyKey}
		if werr := audit.Write(context.WithoutCancel(ctx), db, meta, entry); werr != nil {
			r.Log.Warn("audit refused create", "action", action, "err", werr)
		}
	}
}
