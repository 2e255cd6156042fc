package controld

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/internal/api"
)

func (s *Server) newBillingRunner() (*billing.Runner, error) {
	return billing.NewRunner(billing.Config{Settings: s.cfg.Billing, Pool: s.pool, Release: s.releaseDepleted,
		ReleaseBudget: s.releaseOverBudget, Now: s.cfg.Now, Log: s.cfg.Log.With("loop", "billing")})
}

// BillingTick runs one billing tick now (for tests and `gpuaas dev`).
func (s *Server) BillingTick(ctx context.Context) (billing.TickResult, error) {
	return s.billing.Tick(ctx)
}

// errCauseGone stops a platformRelease: what made the platform release
// the allocations no longer holds (the account was topped up, the budget
// raised or cleared).
var errCauseGone = errors.New("the cause of the release no longer holds")

// platformRelease is the platform releasing allocations for one cause.
type platformRelease struct {
	key         string // idempotency key prefix; the allocation id follows
	fingerprint string // fingerprint prefix; the allocation id follows
	reason      string // the transition's reason
	auditAction string
	what        string // names the release in logs
	// stillDue re-checks the cause in each release's transaction.
	stillDue func(ctx context.Context, tx pgx.Tx) (bool, error)
}

// releaseAll releases ids for r, each through alloc.Release (the state
// machine's release path, as an operator would; actor system:billing) in
// a mutation of its own: audit row, alloc.state events to the project's
// members, idempotency. Each release re-checks the cause in its
// transaction, so a change that lands meanwhile stops the rest. An
// allocation changed meanwhile (released by its user, say) is skipped.
func (s *Server) releaseAll(ctx context.Context, ids []string, r platformRelease) (int, error) {
	actor := alloc.Actor{UserID: billing.SystemActor, Role: api.RoleOperator}
	released := 0
	for _, id := range ids {
		_, err := s.mut.Run(ctx, mutate.Request{Endpoint: api.EndpointAllocRelease, ActorID: billing.SystemActor,
			Key: r.key + id, Fingerprint: []byte(r.fingerprint + id)},
			func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
				due, err := r.stillDue(ctx, tx)
				if err != nil {
					return nil, mutate.Effect{}, err
				}
				if !due {
					return nil, mutate.Effect{}, errCauseGone
				}
				a, eff, err := alloc.Release(ctx, tx, actor, api.AllocReleaseRequest{ID: id, Reason: r.reason}, s.now())
				if err != nil {
					return nil, eff, err
				}
				eff.Audit.Action = r.auditAction
				return a, eff, nil
			})
		switch {
		case errors.Is(err, errCauseGone):
			return released, nil
		case errors.Is(err, api.ErrConflict), errors.Is(err, api.ErrIdempotencyMismatch):
			s.cfg.Log.Info(r.what+" skipped", "allocation", id, "err", err)
		case err != nil:
			return released, fmt.Errorf("release %s: %w", id, err)
		default:
			released++
		}
	}
	if released > 0 {
		s.kickQueue()
	}
	return released, nil
}

// releaseDepleted releases every open allocation of a project whose
// balance ran out more than the grace period ago (releaseAll); a top-up
// that lands meanwhile stops the rest.
func (s *Server) releaseDepleted(ctx context.Context, projectID string) (int, error) {
	open, err := alloc.OpenInProject(ctx, s.pool, projectID)
	if err != nil {
		return 0, err
	}
	return s.releaseAll(ctx, open, platformRelease{key: "billing.depleted:", fingerprint: projectID + "\n",
		reason: "the project's balance ran out and its grace period ended", auditAction: "billing.depleted_release",
		what: "depleted release",
		stillDue: func(ctx context.Context, tx pgx.Tx) (bool, error) {
			return billing.StillDepleted(ctx, tx, projectID, s.cfg.Billing.Grace, s.now())
		}})
}

// releaseOverBudget releases the running allocations of a budget's scope
// whose spend reached the cap with action release (releaseAll, reason
// "budget"); raising or clearing the budget meanwhile stops the rest.
func (s *Server) releaseOverBudget(ctx context.Context, projectID, userID string) (int, error) {
	running, err := billing.RunningInScope(ctx, s.pool, projectID, userID)
	if err != nil {
		return 0, err
	}
	return s.releaseAll(ctx, running, platformRelease{key: "billing.budget:", fingerprint: projectID + "\n" + userID + "\n",
		reason: "budget", auditAction: "billing.budget_release", what: "budget release",
		stillDue: func(ctx context.Context, tx pgx.Tx) (bool, error) {
			return billing.StillOverBudget(ctx, tx, projectID, userID, s.now())
		}})
}
