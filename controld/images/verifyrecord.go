package images

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/corrid"
)

// RecordVerification writes the audit row and the event of a finished
// verification (the Verifier's Record), as its asker's act, at now().
func RecordVerification(now func() time.Time) func(context.Context, pgx.Tx, api.Image, api.Image, Claim, Outcome) error {
	return func(ctx context.Context, tx pgx.Tx, before, after api.Image, c Claim, o Outcome) error {
		eff, err := Effect(ctx, tx, api.EndpointImageVerify, after, map[string]any{"outcome": o,
			"from": before.Trust, "to": after.Trust, "reason": after.TrustReason, "attempts": c.Attempt})
		if err != nil {
			return err
		}
		at := now()
		if err := audit.Write(ctx, tx, audit.Meta{At: at, ActorID: c.RequestedBy, CorrelationID: corrid.New()}, eff.Audit); err != nil {
			return err
		}
		for _, ev := range eff.Events {
			if _, err := outbox.Enqueue(ctx, tx, at, ev); err != nil {
				return err
			}
		}
		return nil
	}
}
